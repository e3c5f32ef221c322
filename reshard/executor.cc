#include "hy/reshard/executor.h"

#include <algorithm>
#include <chrono>
#include <future>

#include "executor_internal.h"
#include "hy/common/thread_pool.h"
#include "hy/metrics/hy_metrics.h"
#include "sparse_delta.h"
#include "spill_file.h"
#include "wire.h"

namespace hy::reshard {
namespace {

using Clock = std::chrono::steady_clock;
using internal::PeerList;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A one-byte bucket from a rank that has failed this run.
constexpr uint8_t kPeerFailed = 0xFF;

// What Pack did; the buckets themselves are Impl::buckets[step].
struct Packed {
  double seconds = 0;
  int64_t changed = 0;
  int64_t unchanged_buckets = 0;
  Status status;
};

}  // namespace

struct Executor::Impl {
  const TransferPlan* plan = nullptr;
  Transport* transport = nullptr;
  ExecutorOptions options;
  int rank = 0;
  int world = 0;
  // [step][peer]: what this rank sends to / receives from peer.
  std::vector<std::vector<PeerList>> send, recv;
  std::vector<Transfer> local;  // plan.local with dst_rank == rank.
  int64_t local_bytes = 0, same_node_bytes = 0, cross_node_bytes = 0;
  int64_t logical_bytes_sent = 0;
  // Sparse delta: whether buckets[][] hold what was last sent (the full
  // form of every bucket), the previous copy each delta is taken against.
  bool delta_ready = false;

  // Per [step][peer]: whether the list can go the sparse way (one wire
  // dtype, and a link fast enough that the codec's XOR form never pays).
  std::vector<std::vector<uint8_t>> send_sparse, recv_sparse;
  // Per [step][peer]: the first peer whose list takes the same source
  // elements in the same order (the planner cuts such twins, e.g. the dp
  // replicas of one tp shard, in lockstep), whose bucket goes to this peer
  // too; the peer itself if none. Only such first peers are packed.
  std::vector<std::vector<int>> packed_as;

  // Buffers kept across runs (allocating and faulting in fresh pages for
  // every bucket cost more than the copies themselves): each step's full
  // bucket to each peer (under sparse delta, also the copy last sent),
  // the delta form when one goes instead, scratch space for Pack per peer
  // (peers are packed in parallel) and for Unpack (the calling thread's).
  std::vector<std::vector<internal::WireBuffer>> buckets;  // [step][peer]
  std::vector<std::vector<internal::WireBuffer>> deltas;   // [step][peer]
  std::vector<std::vector<uint8_t>> sends_delta;           // [step][peer]
  std::vector<internal::WireBuffer> pack_fresh;            // [peer]
  std::vector<internal::SparseScratch> sparse_scratch;     // [peer]
  internal::WireBuffer unpack_before, unpack_now;
  // What each step receives, kept across steps and runs: transports
  // resize it in place, so its pages stay faulted in (a buffer much larger
  // than anything a run received is freed after it: sparse deltas after
  // a full first run would otherwise keep the full size for good).
  std::vector<std::vector<uint8_t>> got;
  std::unique_ptr<ThreadPool> pool;  // Packs peers in parallel; may be null.
  // While parked: the buckets that were previous copies; null otherwise.
  std::unique_ptr<internal::ParkedBuckets> parked;

  // Reads the parked buckets back; the delta state is forgotten if that
  // fails.
  void Unpark() {
    if (parked == nullptr) return;
    if (delta_ready && !parked->Restore(&buckets).ok()) delta_ready = false;
    parked.reset();
  }

  // The full form of `list` from `src` into *b.
  void GatherFull(const PeerList& list, const std::vector<ConstBytes>& src,
                  internal::WireBuffer* b) {
    b->resize(1 + list.wire_bytes);
    (*b)[0] = static_cast<uint8_t>(internal::BucketKind::kFull);
    internal::GatherSource(plan->spec, options.wire, list, src, b->data() + 1);
  }

  // Packs this rank's bucket for `peer` in `step`: the full form into
  // buckets[step][peer], and under `delta` a cheaper form against the
  // previous full form into deltas[step][peer] when there is one
  // (sends_delta says which goes).
  Packed PackPeer(size_t step, int peer, const std::vector<ConstBytes>& src,
                  bool delta) {
    Packed p;
    const PeerList& list = send[step][peer];
    internal::WireBuffer& b = buckets[step][peer];
    internal::WireBuffer& d = deltas[step][peer];
    sends_delta[step][peer] = false;
    if (list.transfers.empty()) {
      b.clear();
      return p;
    }
    if (b.size() != static_cast<size_t>(1 + list.wire_bytes)) delta = false;
    if (!delta) {
      GatherFull(list, src, &b);
      return p;
    }
    if (send_sparse[step][peer]) {
      // Casts over the previous copy in place: b is the new full form
      // whichever form goes.
      const internal::SparseOutcome outcome =
          internal::EncodeSparse(plan->spec, options.wire, list, src,
                                 MutableBytes(b.data() + 1, b.size() - 1),
                                 &sparse_scratch[peer], &d, &p.changed);
      if (outcome == internal::SparseOutcome::kEncoded) {
        sends_delta[step][peer] = true;
        p.unchanged_buckets =
            d[0] == static_cast<uint8_t>(internal::BucketKind::kUnchanged);
        return p;
      }
      if (outcome == internal::SparseOutcome::kTooDense) return p;
    }
    // The gathered way: the new full form beside the previous one.
    internal::WireBuffer& fresh = pack_fresh[peer];
    GatherFull(list, src, &fresh);
    internal::DeltaCost cost;
    cost.link_bytes_per_second = options.link_bytes_per_second;
    int64_t changed = 0;
    p.status = internal::EncodeDelta(
        list.dtype, list.element_size, ConstBytes(b.data() + 1, b.size() - 1),
        ConstBytes(fresh.data() + 1, fresh.size() - 1), &d, &changed, cost);
    std::swap(b, fresh);  // The previous copy becomes scratch.
    sends_delta[step][peer] = !d.empty();
    p.changed = changed;
    p.unchanged_buckets = changed == 0;
    return p;
  }

  Packed Pack(size_t step, const std::vector<ConstBytes>& src, bool delta) {
    auto start = Clock::now();
    std::vector<Packed> each(world);
    auto one = [&](size_t peer) {
      if (packed_as[step][peer] != static_cast<int>(peer)) return;
      each[peer] = PackPeer(step, static_cast<int>(peer), src, delta);
    };
    int busy = 0;
    for (int peer = 0; peer < world; ++peer) {
      busy += !send[step][peer].transfers.empty() &&
              packed_as[step][peer] == peer;
    }
    if (pool != nullptr && busy > 1) {
      pool->ParallelFor(world, one);
    } else {
      for (int peer = 0; peer < world; ++peer) one(peer);
    }
    Packed p;
    for (const Packed& e : each) {
      if (!e.status.ok() && p.status.ok()) p.status = e.status;
      p.changed += e.changed;
      p.unchanged_buckets += e.unchanged_buckets;
    }
    p.seconds = Since(start);
    return p;
  }

  // Every rank learns whether all succeeded. Returns OK if all did, else
  // the first failing rank's error (by rank order), named.
  Status Agree(const Status& mine) {
    std::string msg;
    msg.push_back(static_cast<char>(mine.code()));
    msg += mine.message();
    std::vector<std::vector<uint8_t>> all;
    HY_RETURN_IF_ERROR(transport->AllGatherV(ConstBytes(msg), &all));
    for (int r = 0; r < world; ++r) {
      if (all[r].empty() || all[r][0] == 0) continue;
      std::string text(all[r].begin() + 1, all[r].end());
      return Status(
          static_cast<StatusCode>(all[r][0]),
          r == rank ? text : "rank " + std::to_string(r) + ": " + text);
    }
    return Status::OK();
  }

  Status Unpack(size_t step, std::vector<std::vector<uint8_t>>& got,
                const std::vector<MutableBytes>& dst) {
    std::vector<ConstBytes> dst_view;  // Built once, for delta buckets.
    for (int peer = 0; peer < world; ++peer) {
      const PeerList& list = recv[step][peer];
      if (list.transfers.empty()) {
        if (!got[peer].empty()) {
          return Status::DataLoss("reshard step " + std::to_string(step) +
                                  ": unexpected bytes from rank " +
                                  std::to_string(peer));
        }
        continue;
      }
      ConstBytes wire(got[peer].data(), got[peer].size());
      if (wire.size() == 1 && wire.data()[0] == kPeerFailed) continue;
      if (!wire.empty() &&
          wire.data()[0] == static_cast<uint8_t>(internal::BucketKind::kFull)) {
        if (wire.size() != static_cast<size_t>(1 + list.wire_bytes)) {
          return Status::DataLoss(
              "reshard step " + std::to_string(step) + ": rank " +
              std::to_string(peer) + " sent " + std::to_string(wire.size()) +
              " bytes, expected " + std::to_string(1 + list.wire_bytes));
        }
        internal::Scatter(plan->spec, options.wire, list, wire.data() + 1, dst);
        continue;
      }
      if (recv_sparse[step][peer] &&
          (wire.data()[0] ==
               static_cast<uint8_t>(internal::BucketKind::kPairs) ||
           wire.data()[0] ==
               static_cast<uint8_t>(internal::BucketKind::kUnchanged))) {
        Status s = internal::ApplySparse(list, wire, dst);
        if (!s.ok()) {
          return Status::DataLoss("reshard step " + std::to_string(step) +
                                  " from rank " + std::to_string(peer) + ": " +
                                  std::string(s.message()));
        }
        continue;
      }
      if (dst_view.empty()) {
        for (const MutableBytes& m : dst)
          dst_view.emplace_back(m.data(), m.size());
      }
      internal::WireBuffer& before = unpack_before;
      before.resize(list.wire_bytes);
      internal::GatherWire(plan->spec, options.wire, list, dst_view, true,
                           before.data());
      // Pairs apply in place over the previous copy; a codec chunk needs
      // both.
      const bool in_place =
          !wire.empty() &&
          wire.data()[0] == static_cast<uint8_t>(internal::BucketKind::kPairs);
      if (!in_place) unpack_now.resize(list.wire_bytes);
      internal::WireBuffer& out = in_place ? before : unpack_now;
      bool unchanged = false;
      Status s = internal::DecodeBucket(
          wire, list.dtype, list.element_size,
          ConstBytes(before.data(), before.size()),
          MutableBytes(out.data(), out.size()), &unchanged);
      if (!s.ok()) {
        return Status::DataLoss("reshard step " + std::to_string(step) +
                                " from rank " + std::to_string(peer) + ": " +
                                std::string(s.message()));
      }
      if (!unchanged) {
        internal::Scatter(plan->spec, options.wire, list, out.data(), dst);
      }
    }
    return Status::OK();
  }
};

Executor::Executor(std::shared_ptr<const TransferPlan> plan,
                   Transport* transport, ExecutorOptions options)
    : plan_(std::move(plan)), impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.plan = plan_.get();
  m.transport = transport;
  m.options = options;
  m.rank = transport->rank();
  m.world = plan_->topology.world_size;
  auto wire_es = [&](const Transfer& t) {
    return static_cast<int64_t>(DTypeSize(
        WireDType(plan_->spec.tensors[t.tensor].meta.dtype, options.wire)));
  };
  if (m.rank < 0 || m.rank >= m.world) return;  // Run reports it.
  for (const Transfer& t : plan_->local) {
    if (t.dst_rank != m.rank) continue;
    m.local.push_back(t);
    m.local_bytes += t.length * wire_es(t);
  }
  for (const Step& step : plan_->steps) {
    m.send.emplace_back(m.world);
    m.recv.emplace_back(m.world);
    for (const Transfer& t : step.transfers) {
      if (t.src_rank == m.rank) {
        m.send.back()[t.dst_rank].transfers.push_back(t);
        const Topology& topo = plan_->topology;
        (topo.NodeOf(t.src_rank) == topo.NodeOf(t.dst_rank)
             ? m.same_node_bytes
             : m.cross_node_bytes) += t.length * wire_es(t);
        m.logical_bytes_sent +=
            t.length * static_cast<int64_t>(
                           DTypeSize(plan_->spec.tensors[t.tensor].meta.dtype));
      }
      if (t.dst_rank == m.rank)
        m.recv.back()[t.src_rank].transfers.push_back(t);
    }
    for (int p = 0; p < m.world; ++p) {
      internal::Describe(plan_->spec, options.wire, &m.send.back()[p]);
      internal::Describe(plan_->spec, options.wire, &m.recv.back()[p]);
    }
  }  // The codec's XOR form (encode + decode time) never beats the full form
  // on a link at least this fast, so EncodeDelta's choice reduces to pairs
  // or full, which the sparse path makes without gathering.
  const internal::DeltaCost cost;
  const bool codec_never_pays = 1.0 / options.link_bytes_per_second <=
                                1.0 / cost.codec_encode_bytes_per_second +
                                    1.0 / cost.codec_decode_bytes_per_second;
  int most_peers = 0;
  for (size_t k = 0; k < m.send.size(); ++k) {
    m.send_sparse.emplace_back(m.world);
    m.recv_sparse.emplace_back(m.world);
    m.packed_as.emplace_back(m.world);
    int peers = 0;
    for (int p = 0; p < m.world; ++p) {
      int& as = m.packed_as[k][p];
      for (as = 0; as < p; ++as) {
        if (internal::SameSource(m.send[k][as], m.send[k][p])) break;
      }
      peers += !m.send[k][p].transfers.empty() && as == p;
      m.send_sparse[k][p] =
          codec_never_pays &&
          internal::SparseEligible(plan_->spec, options.wire, m.send[k][p]);
      m.recv_sparse[k][p] =
          internal::SparseEligible(plan_->spec, options.wire, m.recv[k][p]);
    }
    most_peers = std::max(most_peers, peers);
  }
  m.buckets.assign(m.send.size(), std::vector<internal::WireBuffer>(m.world));
  m.deltas.assign(m.send.size(), std::vector<internal::WireBuffer>(m.world));
  m.sends_delta.assign(m.send.size(), std::vector<uint8_t>(m.world, 0));
  m.pack_fresh.resize(m.world);
  m.sparse_scratch.resize(m.world);
  const int threads = std::min<int>(
      most_peers, options.pack_threads > 0
                      ? options.pack_threads
                      : static_cast<int>(ThreadPool::DefaultThreadCount()));
  if (threads > 1) m.pool = std::make_unique<ThreadPool>(threads - 1);
}

Executor::~Executor() = default;

void Executor::ResetDelta() { impl_->delta_ready = false; }

Status Executor::Park(const std::string& dir) {
  Impl& m = *impl_;
  if (m.parked != nullptr) return Status::OK();
  for (auto& row : m.deltas) {
    for (internal::WireBuffer& d : row) internal::WireBuffer().swap(d);
  }
  for (internal::WireBuffer& f : m.pack_fresh) internal::WireBuffer().swap(f);
  for (internal::SparseScratch& s : m.sparse_scratch) {
    s = internal::SparseScratch();
  }
  internal::WireBuffer().swap(m.unpack_before);
  internal::WireBuffer().swap(m.unpack_now);
  for (auto& g : m.got) std::vector<uint8_t>().swap(g);
  if (!m.delta_ready) {
    for (auto& row : m.buckets) {
      for (internal::WireBuffer& b : row) internal::WireBuffer().swap(b);
    }
    return Status::OK();
  }
  // Only a full form of its list's size is a previous copy.
  std::vector<std::vector<size_t>> sizes(m.buckets.size());
  for (size_t k = 0; k < m.buckets.size(); ++k) {
    for (int p = 0; p < m.world; ++p) {
      sizes[k].push_back(1 + static_cast<size_t>(m.send[k][p].wire_bytes));
    }
  }
  Result<internal::ParkedBuckets> parked =
      internal::ParkedBuckets::Park(dir, sizes, &m.buckets);
  if (!parked.ok()) {
    m.delta_ready = false;
    return parked.status();
  }
  m.parked = std::make_unique<internal::ParkedBuckets>(std::move(*parked));
  return Status::OK();
}

Status Executor::Run(const std::vector<ConstBytes>& src,
                     const std::vector<MutableBytes>& dst,
                     ReshardStats* stats) {
  Impl& m = *impl_;
  const TransferPlan& plan = *plan_;
  const auto start = Clock::now();
  const int n = static_cast<int>(plan.spec.tensors.size());
  if (m.transport->world_size() != m.world || m.rank < 0 || m.rank >= m.world) {
    return Status::InvalidArgument(
        "world size mismatch: the plan is for " + std::to_string(m.world) +
        " ranks, the transport has rank " + std::to_string(m.rank) + " of " +
        std::to_string(m.transport->world_size()));
  }
  if (static_cast<int>(src.size()) != n || static_cast<int>(dst.size()) != n) {
    return Status::InvalidArgument("reshard: expected " + std::to_string(n) +
                                   " source and destination "
                                   "buffers, got " +
                                   std::to_string(src.size()) + " and " +
                                   std::to_string(dst.size()));
  }
  for (int t = 0; t < n; ++t) {
    DType dtype = plan.spec.tensors[t].meta.dtype;
    size_t want_src = plan.src.Get(m.rank, t).num_elements * DTypeSize(dtype);
    size_t want_dst = plan.dst.Get(m.rank, t).num_elements *
                      DTypeSize(WireDType(dtype, m.options.wire));
    if (src[t].size() != want_src || dst[t].size() != want_dst) {
      return Status::InvalidArgument(
          "reshard: tensor " + plan.spec.tensors[t].meta.name + " on rank " +
          std::to_string(m.rank) + ": buffers of " +
          std::to_string(src[t].size()) + " / " +
          std::to_string(dst[t].size()) + " bytes, the plan needs " +
          std::to_string(want_src) + " / " + std::to_string(want_dst));
    }
  }

  m.Unpark();
  ReshardStats st;
  st.plan_seconds = plan.stats.plan_seconds;
  st.local_bytes = m.local_bytes;
  st.same_node_bytes = m.same_node_bytes;
  st.cross_node_bytes = m.cross_node_bytes;
  st.logical_bytes_sent = m.logical_bytes_sent;
  st.steps = static_cast<int>(plan.steps.size());

  const bool delta = m.options.sparse_delta && m.delta_ready;
  auto fail = [&](Status s) {
    ResetDelta();
    return s;
  };
  std::future<Packed> next;
  if (!plan.steps.empty()) {
    next =
        std::async(std::launch::async, [&] { return m.Pack(0, src, delta); });
  }
  // The local copies overlap the first pack.
  auto t0 = Clock::now();
  for (const Transfer& t : m.local) {
    internal::CopyLocal(plan.spec, m.options.wire, t, src, dst);
  }
  st.unpack_seconds += Since(t0);
  // The largest message from each peer this run: a receive buffer far
  // larger (kept from a dense run, now that deltas are small) is let go.
  std::vector<size_t> most_received(m.world, 0);
  // A pack or unpack error on this rank does not stop its part in the
  // remaining exchanges (the others would wait for it); the ranks agree on
  // the outcome at the end. A transport error ends the run at once.
  Status local_error;
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    Packed packed = next.get();
    if (k + 1 < plan.steps.size()) {
      next = std::async(std::launch::async,
                        [&, k] { return m.Pack(k + 1, src, delta); });
    }
    if (!packed.status.ok() && local_error.ok()) {
      local_error = packed.status;
    }
    st.pack_seconds += packed.seconds;
    st.changed_elements_sent += packed.changed;
    st.buckets_unchanged += packed.unchanged_buckets;
    std::vector<ConstBytes> out(m.world);
    for (int p = 0; p < m.world; ++p) {
      if (m.send[k][p].transfers.empty()) continue;
      const int q = m.packed_as[k][p];
      st.buckets_shared += q != p;
      const internal::WireBuffer& b =
          m.sends_delta[k][q] ? m.deltas[k][q] : m.buckets[k][q];
      // A rank that has failed tells its receivers: they skip its buckets
      // and the agreement below reports the cause.
      out[p] = local_error.ok() ? ConstBytes(b.data(), b.size())
                                : ConstBytes(&kPeerFailed, 1);
      st.wire_bytes_sent += static_cast<int64_t>(out[p].size());
    }
    std::vector<std::vector<uint8_t>>& got = m.got;
    got.resize(m.world);
    t0 = Clock::now();
    Status s = m.transport->AllToAllV(out, &got);
    st.transfer_seconds += Since(t0);
    if (!s.ok()) {
      if (next.valid()) next.wait();
      return fail(s);
    }
    for (int p = 0; p < m.world; ++p) {
      st.wire_bytes_received += static_cast<int64_t>(got[p].size());
      most_received[p] = std::max(most_received[p], got[p].size());
    }
    if (!local_error.ok()) continue;
    t0 = Clock::now();
    local_error = m.Unpack(k, got, dst);
    st.unpack_seconds += Since(t0);
  }
  if (!plan.steps.empty()) {
    Status agreed = m.Agree(local_error);
    if (!agreed.ok()) return fail(agreed);
  }
  // Every bucket's full form is what its receiver now holds.
  m.delta_ready = m.options.sparse_delta;
  for (int p = 0; p < m.world && p < static_cast<int>(m.got.size()); ++p) {
    if (m.got[p].capacity() > 2 * most_received[p] + (size_t{1} << 20)) {
      std::vector<uint8_t>().swap(m.got[p]);
    }
  }
  st.total_seconds = Since(start);

  if (m.options.metrics != nullptr) {
    RecordReshardMetrics(*m.options.metrics, st, m.options.direction,
                         m.transport->name(), m.options.wire,
                         m.options.sparse_delta);
  }
  if (stats != nullptr) *stats = st;
  return Status::OK();
}

}  // namespace hy::reshard
