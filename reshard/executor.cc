#include "hy/reshard/executor.h"

#include <algorithm>
#include <future>

#include "executor_impl.h"
#include "hy/metrics/hy_metrics.h"

namespace hy::reshard {
namespace {

using internal::Clock;
using internal::kPeerFailed;
using internal::Packed;
using internal::SecondsSince;

}  // namespace

Executor::Executor(std::shared_ptr<const TransferPlan> plan,
                   Transport* transport, ExecutorOptions options)
    : plan_(std::move(plan)), impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.plan = plan_.get();
  m.transport = transport;
  m.options = options;
  m.rank = transport->rank();
  m.world = plan_->topology.world_size;
  m.link_bytes_per_second = options.link_bytes_per_second;
  m.scan_bytes_per_second = options.scan_bytes_per_second;
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

// InvalidArgument unless the transport's world, the plan's layouts and the
// caller's buffers fit the plan on this rank.
Status Executor::Impl::CheckRunArguments(
    const std::vector<ConstBytes>& src,
    const std::vector<MutableBytes>& dst) const {
  const Executor::Impl& m = *this;
  const TransferPlan& plan = *this->plan;
  const int n = static_cast<int>(plan.spec.tensors.size());
  if (m.transport->world_size() != m.world || m.rank < 0 || m.rank >= m.world) {
    return Status::InvalidArgument(
        "world size mismatch: the plan is for " + std::to_string(m.world) +
        " ranks, the transport has rank " + std::to_string(m.rank) + " of " +
        std::to_string(m.transport->world_size()));
  }
  if (plan.src.world_size() > m.world || plan.dst.world_size() > m.world) {
    return Status::InvalidArgument(
        "reshard: the plan's layouts have " +
        std::to_string(plan.src.world_size()) + " and " +
        std::to_string(plan.dst.world_size()) + " ranks, more than its " +
        std::to_string(m.world) + "-rank world");
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
    // A rank beyond a layout's world holds (or receives) nothing.
    const int64_t src_n = m.rank < plan.src.world_size()
                              ? plan.src.Get(m.rank, t).num_elements
                              : 0;
    const int64_t dst_n = m.rank < plan.dst.world_size()
                              ? plan.dst.Get(m.rank, t).num_elements
                              : 0;
    size_t want_src = static_cast<size_t>(src_n) * DTypeSize(dtype);
    size_t want_dst = static_cast<size_t>(dst_n) *
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
  return Status::OK();
}

void internal::RunTally::AddPacked(const Packed& packed, ReshardStats* st) {
  st->pack_seconds += packed.seconds;
  st->changed_elements_sent += packed.changed;
  st->buckets_unchanged += packed.unchanged_buckets;
  st->buckets_full_by_cost += packed.full_by_cost;
  scan_bytes += packed.scan_bytes;
  scan_seconds += packed.scan_seconds;
  gather_bytes += packed.gather_bytes;
  gather_seconds += packed.gather_seconds;
}

// Step k's message to each peer (empty where it sends nothing): its
// bucket, or, once this rank has failed, the one byte that says so (its
// receivers skip its buckets and the agreement reports the cause).
std::vector<ConstBytes> Executor::Impl::Outgoing(size_t k, bool failed,
                                                 ReshardStats* st,
                                                 int64_t* sent) const {
  const Executor::Impl& m = *this;
  std::vector<ConstBytes> out(m.world);
  for (int p = 0; p < m.world; ++p) {
    if (m.send[k][p].transfers.empty()) continue;
    const int q = m.packed_as[k][p];
    st->buckets_shared += q != p;
    const internal::WireBuffer& b =
        m.sends_delta[k][q] ? m.deltas[k][q] : m.buckets[k][q];
    out[p] = failed ? ConstBytes(&kPeerFailed, 1)
                    : ConstBytes(b.data(), b.size());
    st->wire_bytes_sent += static_cast<int64_t>(out[p].size());
    *sent += static_cast<int64_t>(out[p].size());
  }
  return out;
}

// After a run: a receive buffer far larger than this run's largest message
// from its peer (kept from a dense run, now that deltas are small) is let
// go, and the learned speeds are kept for the next run's choices.
void Executor::Impl::Learn(const internal::RunTally& tally, ReshardStats* st) {
  Executor::Impl& m = *this;
  for (int p = 0; p < m.world && p < static_cast<int>(m.got.size()); ++p) {
    if (m.got[p].capacity() > 2 * tally.most_received[p] + (size_t{1} << 20)) {
      std::vector<uint8_t>().swap(m.got[p]);
    }
  }
  if (m.options.learn_link_speed && tally.fastest_exchange > 0) {
    m.link_bytes_per_second = tally.fastest_exchange;
  }
  if (tally.scan_seconds > 0 && m.options.scan_bytes_per_second <= 0) {
    m.scan_bytes_per_second = tally.scan_bytes / tally.scan_seconds;
  }
  if (tally.gather_seconds > 0) {
    m.gather_bytes_per_second = tally.gather_bytes / tally.gather_seconds;
  }
  st->link_bytes_per_second = m.link_bytes_per_second;
  st->scan_bytes_per_second = m.scan_bytes_per_second;
}

Status Executor::Run(const std::vector<ConstBytes>& src,
                     const std::vector<MutableBytes>& dst,
                     ReshardStats* stats) {
  Impl& m = *impl_;
  const TransferPlan& plan = *plan_;
  const auto start = Clock::now();
  HY_RETURN_IF_ERROR(m.CheckRunArguments(src, dst));
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
  st.unpack_seconds += SecondsSince(t0);
  internal::RunTally tally;
  tally.most_received.assign(m.world, 0);
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
    tally.AddPacked(packed, &st);
    int64_t sent_here = 0;
    std::vector<ConstBytes> out =
        m.Outgoing(k, !local_error.ok(), &st, &sent_here);
    std::vector<std::vector<uint8_t>>& got = m.got;
    got.resize(m.world);
    t0 = Clock::now();
    Status s = m.transport->AllToAllV(out, &got);
    const double exchange_seconds = SecondsSince(t0);
    st.transfer_seconds += exchange_seconds;
    if (!s.ok()) {
      if (next.valid()) next.wait();
      return fail(s);
    }
    int64_t received_here = 0;
    for (int p = 0; p < m.world; ++p) {
      st.wire_bytes_received += static_cast<int64_t>(got[p].size());
      if (p != m.rank) received_here += static_cast<int64_t>(got[p].size());
      tally.most_received[p] = std::max(tally.most_received[p], got[p].size());
    }
    const int64_t moved = std::max(sent_here, received_here);
    if (moved >= (int64_t{1} << 20) && exchange_seconds > 0) {
      tally.fastest_exchange =
          std::max(tally.fastest_exchange, moved / exchange_seconds);
    }
    if (!local_error.ok()) continue;
    t0 = Clock::now();
    local_error = m.Unpack(k, got, dst);
    st.unpack_seconds += SecondsSince(t0);
  }
  if (!plan.steps.empty()) {
    Status agreed = m.Agree(local_error);
    if (!agreed.ok()) return fail(agreed);
  }
  // Every bucket's full form is what its receiver now holds.
  m.delta_ready = m.options.sparse_delta;
  st.total_seconds = SecondsSince(start);
  m.Learn(tally, &st);
  if (m.options.metrics != nullptr) {
    RecordReshardMetrics(*m.options.metrics, st, m.options.direction,
                         m.transport->name(), m.options.wire,
                         m.options.sparse_delta);
  }
  if (stats != nullptr) *stats = st;
  return Status::OK();
}

}  // namespace hy::reshard
