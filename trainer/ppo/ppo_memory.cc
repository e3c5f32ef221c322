// PpoWorker's memory: each phase's peak resident memory for the iteration
// report, and the reference model and the Adam moments offloaded to a
// file (trainer.offload_reference, trainer.offload_optimizer; the rollout
// weights' trainer.offload_rollout is hy_decoder_engine.cc's).

#include <malloc.h>

#include <algorithm>
#include <functional>

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

void PpoWorker::ReturnFreedHeap() { malloc_trim(0); }

std::string PpoWorker::NodeDirectory() const {
  return recovery::NodeDir(config_.checkpoint.store_root,
                           nodes_[comm_->rank()]);
}

Status PpoWorker::OffloadReference() {
  if (comm_->on_cuda()) {
    // Page-locked, so the copies to the device run at the link's speed.
    ref_host_ =
        at::empty({ref_->params().numel()},
                  at::TensorOptions().dtype(at::kFloat).pinned_memory(true));
    ref_host_.copy_(ref_->params());
    ref_->params() = ref_host_;
    Log("reference model offloaded to page-locked host memory");
    return Status::OK();
  }
  const std::string dir = NodeDirectory();
  HY_ASSIGN_OR_RETURN(OffloadedTensor t,
                      OffloadedTensor::Create(dir, ref_->params().numel()));
  t.tensor().copy_(ref_->params());
  ref_->params() = t.tensor();
  ref_offload_ = std::make_unique<OffloadedTensor>(std::move(t));
  Log("reference model offloaded to a file in " + dir);
  return Status::OK();
}

std::function<void()> PpoWorker::ReferenceOnDevice() {
  if (!ref_host_.defined()) return nullptr;
  ref_->params() = ref_host_.to(comm_->device(), /*non_blocking=*/true);
  return [this] { ref_->params() = ref_host_; };
}

const OffloadedTensor* PpoWorker::OffloadedReference() const {
  if (ref_offload_ == nullptr ||
      ref_->params().data_ptr() != ref_offload_->tensor().data_ptr()) {
    return nullptr;
  }
  return ref_offload_.get();
}

std::function<void()> PpoWorker::ReleaseReferenceAsRead(
    std::vector<statestore::ShardData>* ref_shards) const {
  const OffloadedTensor* offloaded = OffloadedReference();
  if (offloaded == nullptr) return nullptr;
  // Reading the offloaded reference brings its pages back: each chunk's go
  // as soon as the save has read it, what is left once the save is done
  // (unless the experience phase is reading them then).
  for (statestore::ShardData& s : *ref_shards) {
    s.after_chunk_read = [ref = *offloaded,
                          in_use = reference_in_use_](ConstBytes chunk) {
      if (!in_use->load()) ref.ReleaseRange(chunk).IgnoreError();
    };
  }
  return [ref = *offloaded, in_use = reference_in_use_] {
    if (!in_use->load()) ref.Release().IgnoreError();
  };
}

void PpoWorker::ReleaseReference() {
  const OffloadedTensor* ref = OffloadedReference();
  if (ref == nullptr) return;
  Status s = ref->Release();
  if (!s.ok()) Log("reference offload: " + s.ToString());
}

Status PpoWorker::OffloadOptimizer() {
  const std::string dir = NodeDirectory();
  for (FsdpModel* m : {actor_.get(), critic_.get()}) {
    if (m != nullptr) HY_RETURN_IF_ERROR(m->OffloadMoments(dir));
  }
  Log(comm_->on_cuda() ? "Adam moments offloaded to page-locked host memory"
                       : "Adam moments offloaded to a file in " + dir);
  return Status::OK();
}

void PpoWorker::ReleaseOptimizer() {
  for (const FsdpModel* m : {actor_.get(), critic_.get()}) {
    if (m == nullptr) continue;
    Status s = m->ReleaseMoments();
    if (!s.ok()) Log("optimizer offload: " + s.ToString());
  }
}

}  // namespace hy::trainer
