// PpoWorker's memory: each phase's peak resident memory for the iteration
// report, and the reference model and the rollout weights offloaded to a
// file (trainer.offload_reference, trainer.offload_rollout).

#include <algorithm>

#include "hy/common/process_memory.h"
#include "hy/recovery/node_layout.h"
#include "ppo_worker.h"

namespace hy::trainer {
namespace {

constexpr const char* kPhaseNames[PhasePeaks::kNumPhases] = {
    "sync", "rollout", "experience", "update", "checkpoint"};

}  // namespace

PhasePeaks::PhasePeaks() : ok_(ResetPeakResident()) {}

void PhasePeaks::End(Phase phase) {
  mb_[phase] = PeakResidentBytes() / 1e6;
  ok_ = ResetPeakResident() && ok_;
}

Status PpoWorker::ReportPeaks(const PhasePeaks& peaks,
                              IterationReport* report) {
  constexpr int kPhases = PhasePeaks::kNumPhases;
  // [rank][phase], and a last column: 1 where the resets worked.
  const int world = comm_->world_size();
  std::vector<double> all((kPhases + 1) * world, 0.0);
  double* mine = &all[comm_->rank() * (kPhases + 1)];
  for (int ph = 0; ph < kPhases; ++ph) {
    mine[ph] = peaks.mb(static_cast<PhasePeaks::Phase>(ph));
  }
  mine[kPhases] = peaks.ok();
  HY_ASSIGN_OR_RETURN(all, comm_->SumAcrossRanks(all));
  bool all_ok = true;
  report->peak_rss_mb.assign(world, 0.0);
  std::vector<double> phase_max(kPhases, 0.0);
  for (int r = 0; r < world; ++r) {
    const double* row = &all[r * (kPhases + 1)];
    all_ok = all_ok && row[kPhases] > 0.5;
    for (int ph = 0; ph < kPhases; ++ph) {
      report->peak_rss_mb[r] = std::max(report->peak_rss_mb[r], row[ph]);
      phase_max[ph] = std::max(phase_max[ph], row[ph]);
    }
  }
  if (all_ok) {
    for (int ph = 0; ph < kPhases; ++ph) {
      report->phase_peak_rss_mb.push_back({kPhaseNames[ph], phase_max[ph]});
    }
  }
  return Status::OK();
}

Status PpoWorker::OffloadReference() {
  const std::string dir = recovery::NodeDir(config_.checkpoint.store_root,
                                            nodes_[comm_->rank()]);
  HY_ASSIGN_OR_RETURN(OffloadedTensor t,
                      OffloadedTensor::Create(dir, ref_->params().numel()));
  t.tensor().copy_(ref_->params());
  ref_->params() = t.tensor();
  ref_offload_ = std::make_unique<OffloadedTensor>(std::move(t));
  Log("reference model offloaded to a file in " + dir);
  return Status::OK();
}

void PpoWorker::ReleaseReference() {
  if (ref_offload_ == nullptr ||
      ref_->params().data_ptr() != ref_offload_->tensor().data_ptr()) {
    return;
  }
  Status s = ref_offload_->Release();
  if (!s.ok()) Log("reference offload: " + s.ToString());
}

Status PpoWorker::AllocateRolloutShards() {
  const int rank = comm_->rank();
  std::vector<std::vector<int64_t>> sizes;
  int64_t total = 0;
  for (int t = 0; t < actor_->num_tensors(); ++t) {
    sizes.push_back(plan_->dst.Get(rank, t).geometry.box().sizes);
    int64_t n = 1;
    for (int64_t d : sizes.back()) n *= d;
    total += n;
  }
  at::Tensor flat;
  rollout_offload_.reset();
  if (config_.trainer.offload_rollout) {
    const std::string dir =
        recovery::NodeDir(config_.checkpoint.store_root, nodes_[rank]);
    HY_ASSIGN_OR_RETURN(OffloadedTensor t,
                        OffloadedTensor::Create(dir, total, at::kBFloat16));
    rollout_offload_ = std::make_unique<OffloadedTensor>(std::move(t));
    flat = rollout_offload_->tensor();
    Log("rollout weights offloaded to a file in " + dir);
  } else {
    flat = at::empty({total}, at::kBFloat16);
  }
  rollout_shards_.clear();
  int64_t offset = 0;
  for (const auto& s : sizes) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    rollout_shards_.push_back(flat.narrow(0, offset, n).view(s));
    offset += n;
  }
  return Status::OK();
}

void PpoWorker::ReleaseRollout() {
  if (rollout_offload_ == nullptr) return;
  Status s = rollout_offload_->Release();
  if (!s.ok()) Log("rollout offload: " + s.ToString());
}

void PpoWorker::ParkReshard() {
  if (!config_.trainer.offload_rollout || executor_ == nullptr) return;
  Status s = executor_->Park(recovery::NodeDir(config_.checkpoint.store_root,
                                               nodes_[comm_->rank()]));
  if (!s.ok()) Log("reshard park: " + s.ToString());
}

}  // namespace hy::trainer
