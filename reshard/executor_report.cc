// What a run reports: ReshardStats::Merge and RecordReshardMetrics (see
// hy/reshard/executor.h).

#include <algorithm>

#include "hy/metrics/hy_metrics.h"
#include "hy/reshard/executor.h"

namespace hy::reshard {

void RecordReshardMetrics(const metrics::HyMetrics& hm, const ReshardStats& st,
                          int direction, std::string_view transport,
                          WireFormat wire, bool sparse_delta) {
  using metrics::ReshardBytesKind;
  using metrics::ReshardPhase;
  hm.reshard_phase(ReshardPhase::kPlan)->Observe(st.plan_seconds);
  hm.reshard_phase(ReshardPhase::kPack)->Observe(st.pack_seconds);
  hm.reshard_phase(ReshardPhase::kTransfer)->Observe(st.transfer_seconds);
  hm.reshard_phase(ReshardPhase::kUnpack)->Observe(st.unpack_seconds);
  hm.reshard_bytes(ReshardBytesKind::kLocal)
      ->Increment(static_cast<double>(st.local_bytes));
  hm.reshard_bytes(ReshardBytesKind::kNode)
      ->Increment(static_cast<double>(st.same_node_bytes));
  hm.reshard_bytes(ReshardBytesKind::kRemote)
      ->Increment(static_cast<double>(st.cross_node_bytes));
  const auto transport_label =
      transport == "gloo"   ? metrics::ReshardTransport::kGloo
      : transport == "nccl" ? metrics::ReshardTransport::kNccl
                            : metrics::ReshardTransport::kLocal;
  const auto wire_label = sparse_delta ? metrics::ReshardWire::kDelta
                          : wire == WireFormat::kBf16
                              ? metrics::ReshardWire::kBf16
                              : metrics::ReshardWire::kRaw;
  hm.reshard_logical_bytes->Increment(
      static_cast<double>(st.logical_bytes_sent));
  hm.reshard_wire_bytes(wire_label)
      ->Increment(static_cast<double>(st.wire_bytes_sent));
  const auto direction_label = direction == 0
                                   ? metrics::ReshardDirection::kTrainToRollout
                                   : metrics::ReshardDirection::kRolloutToTrain;
  auto h = hm.ReshardDuration(direction_label, transport_label, wire_label);
  if (h.ok()) (*h)->Observe(st.total_seconds);
}

void ReshardStats::Merge(const ReshardStats& o) {
  plan_seconds = std::max(plan_seconds, o.plan_seconds);
  pack_seconds = std::max(pack_seconds, o.pack_seconds);
  transfer_seconds = std::max(transfer_seconds, o.transfer_seconds);
  unpack_seconds = std::max(unpack_seconds, o.unpack_seconds);
  total_seconds = std::max(total_seconds, o.total_seconds);
  local_bytes += o.local_bytes;
  same_node_bytes += o.same_node_bytes;
  cross_node_bytes += o.cross_node_bytes;
  logical_bytes_sent += o.logical_bytes_sent;
  wire_bytes_sent += o.wire_bytes_sent;
  wire_bytes_received += o.wire_bytes_received;
  changed_elements_sent += o.changed_elements_sent;
  buckets_unchanged += o.buckets_unchanged;
  buckets_shared += o.buckets_shared;
  buckets_full_by_cost += o.buckets_full_by_cost;
  // Rates: the slowest rank's, which bounds the job.
  auto slowest = [](double a, double b) {
    return a <= 0 ? b : b <= 0 ? a : std::min(a, b);
  };
  link_bytes_per_second =
      slowest(link_bytes_per_second, o.link_bytes_per_second);
  scan_bytes_per_second =
      slowest(scan_bytes_per_second, o.scan_bytes_per_second);
  steps = std::max(steps, o.steps);
}

}  // namespace hy::reshard
