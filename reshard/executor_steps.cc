#include <string>

#include "executor_impl.h"

namespace hy::reshard {

using internal::Clock;
using internal::kPeerFailed;
using internal::Packed;
using internal::PeerList;
using internal::SecondsSince;

void Executor::Impl::Unpark() {
  if (parked == nullptr) return;
  if (delta_ready && !parked->Restore(&buckets).ok()) delta_ready = false;
  parked.reset();
}

void Executor::Impl::GatherFull(const PeerList& list,
                                const std::vector<ConstBytes>& src,
                                internal::WireBuffer* b) {
  b->resize(1 + list.wire_bytes);
  (*b)[0] = static_cast<uint8_t>(internal::BucketKind::kFull);
  internal::GatherSource(plan->spec, options.wire, list, src, b->data() + 1);
}

Packed Executor::Impl::PackPeer(size_t step, int peer,
                                const std::vector<ConstBytes>& src,
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
    const auto gather_start = Clock::now();
    GatherFull(list, src, &b);
    p.gather_seconds = SecondsSince(gather_start);
    p.gather_bytes = list.wire_bytes;
    return p;
  }
  if (send_sparse[step][peer]) {
    // What a scan costs per byte beyond packing the full form (which casts
    // as the scan does): where the link carries a byte faster than that,
    // no delta can pay, whatever changed. b becomes what the receiver gets.
    const double extra =
        scan_bytes_per_second > 0
            ? 1.0 / scan_bytes_per_second - (gather_bytes_per_second > 0
                                                 ? 1.0 / gather_bytes_per_second
                                                 : 0.0)
            : 0.0;
    if (options.learn_link_speed && extra > 0 &&
        1.0 / link_bytes_per_second <= extra) {
      GatherFull(list, src, &b);
      p.full_by_cost = 1;
      return p;
    }
    // Casts over the previous copy in place: b is the new full form
    // whichever form goes.
    const auto scan_start = Clock::now();
    const internal::SparseOutcome outcome =
        internal::EncodeSparse(plan->spec, options.wire, list, src,
                               MutableBytes(b.data() + 1, b.size() - 1),
                               &sparse_scratch[peer], &d, &p.changed);
    p.scan_seconds = SecondsSince(scan_start);
    p.scan_bytes = list.wire_bytes;
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
  cost.link_bytes_per_second = link_bytes_per_second;
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

Packed Executor::Impl::Pack(size_t step, const std::vector<ConstBytes>& src,
                            bool delta) {
  auto start = Clock::now();
  std::vector<Packed> each(world);
  auto one = [&](size_t peer) {
    if (packed_as[step][peer] != static_cast<int>(peer)) return;
    each[peer] = PackPeer(step, static_cast<int>(peer), src, delta);
  };
  int busy = 0;
  for (int peer = 0; peer < world; ++peer) {
    busy +=
        !send[step][peer].transfers.empty() && packed_as[step][peer] == peer;
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
    p.full_by_cost += e.full_by_cost;
    p.gather_bytes += e.gather_bytes;
    p.gather_seconds += e.gather_seconds;
    p.scan_bytes += e.scan_bytes;
    p.scan_seconds += e.scan_seconds;
  }
  p.seconds = SecondsSince(start);
  return p;
}

Status Executor::Impl::Agree(const Status& mine) {
  std::string msg;
  msg.push_back(static_cast<char>(mine.code()));
  msg += mine.message();
  std::vector<std::vector<uint8_t>> all;
  HY_RETURN_IF_ERROR(transport->AllGatherV(ConstBytes(msg), &all));
  for (int r = 0; r < world; ++r) {
    if (all[r].empty() || all[r][0] == 0) continue;
    std::string text(all[r].begin() + 1, all[r].end());
    return Status(static_cast<StatusCode>(all[r][0]),
                  r == rank ? text : "rank " + std::to_string(r) + ": " + text);
  }
  return Status::OK();
}

Status Executor::Impl::Unpack(size_t step,
                              std::vector<std::vector<uint8_t>>& got,
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
        (wire.data()[0] == static_cast<uint8_t>(internal::BucketKind::kPairs) ||
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
    Status s = internal::DecodeBucket(wire, list.dtype, list.element_size,
                                      ConstBytes(before.data(), before.size()),
                                      MutableBytes(out.data(), out.size()),
                                      &unchanged);
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

}  // namespace hy::reshard
