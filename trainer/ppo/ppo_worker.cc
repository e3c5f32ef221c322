// PpoWorker: the iteration loop, agreeing to stop, and RunWorker, the
// public entry point. What a worker builds before its first iteration (and
// a fresh start's weights) is in ppo_setup.cc; memory (phase peaks, the
// offloaded reference) in ppo_memory.cc; checkpoints and what a resume
// restores in ppo_recovery.cc.

#include "ppo_worker.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "hy/checkpoint/checkpoint.h"
#include "hy/metrics/hy_metrics.h"

namespace hy::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

PpoWorker::PpoWorker(const TrainConfig& config, const WorkerOptions& options)
    : config_(config), options_(options) {}

PpoWorker::~PpoWorker() = default;

void PpoWorker::Log(const std::string& line) const {
  if (options_.log && (comm_ == nullptr || comm_->rank() == 0)) {
    options_.log(line);
  }
}

Status PpoWorker::RestoreOrStart(Clock::time_point run_start) {
  const std::string& root = config_.checkpoint.store_root;
  recovery::RecoveryOptions ro;
  ro.root = root;
  ro.nodes = nodes_;
  // Fetch exchanges other ranks' shards within the checkpoint's bound.
  if (config_.checkpoint.staging_mb > 0) {
    ro.fetch_bytes = static_cast<uint64_t>(config_.checkpoint.staging_mb) << 20;
  }
  ro.log = [this](const std::string& line) { Log("recovery: " + line); };
  ro.metrics = options_.metrics;
  HY_ASSIGN_OR_RETURN(std::unique_ptr<recovery::Recovery> rec,
                      recovery::Recovery::Open(comm_->transport(), ro));
  if (rec->has_state()) {
    // A host that joins a running job starts fresh (restart count 0) while
    // the others restart: one rank restarting makes it a restart for all.
    HY_ASSIGN_OR_RETURN(const bool restart, AnyRankRestarted());
    if (!options_.resume && !restart) {
      return Status::FailedPrecondition(
          "store root " + root + " already holds committed step " +
          std::to_string(rec->choice().commit.step) +
          "; continue it with --resume or choose another store");
    }
    HY_RETURN_IF_ERROR(ResumeFrom(rec.get()));
  } else if (options_.resume) {
    return Status::FailedPrecondition("nothing committed under " + root +
                                      " to resume");
  } else {
    HY_RETURN_IF_ERROR(InitFresh());
  }
  checkpoint::CheckpointOptions co;
  co.root = root;
  co.rank = comm_->rank();
  co.world_size = comm_->world_size();
  co.nodes = nodes_;
  co.generation = rec->next_generation();
  co.replicas = config_.checkpoint.replicas;
  co.transport = comm_->aux();
  co.keep_last = config_.checkpoint.keep_last;
  co.keep_superseded = config_.checkpoint.keep_superseded;
  co.commit_timeout_ms = config_.checkpoint.commit_timeout_ms;
  co.staging_bytes = static_cast<uint64_t>(config_.checkpoint.staging_mb) << 20;
  co.read_in_place = config_.checkpoint.read_in_place;
  co.metrics = options_.metrics;
  co.run_id = run_id_;
  co.log_damage = [rank = comm_->rank()](const std::string& line) {
    std::cerr << "rank " << rank << ": " << line << std::endl;
  };
  rec.reset();  // Closes the copies it read.
  HY_ASSIGN_OR_RETURN(checkpointer_, checkpoint::Checkpointer::Open(co));
  if (recovered_step_ >= 0 && config_.checkpoint.save_every > 0) {
    // The rebuilt state under the new layout and placement, saved and
    // replicated in the background like any checkpoint: R copies again
    // while training goes on (kReplicate is observed when it commits).
    IterationReport ignored;
    HY_RETURN_IF_ERROR(SaveCheckpoint(start_iteration_, &ignored));
    replicate_start_ = Clock::now();
    awaiting_replicas_ = true;
  }
  if (recovered_step_ >= 0 && options_.metrics != nullptr) {
    options_.metrics->recovery_duration(metrics::RecoveryPhase::kResume)
        ->Observe(Seconds(run_start));
  }
  return Status::OK();
}

Status PpoWorker::TrainIteration(int64_t it, Experience* exp,
                                 IterationReport* report, PhasePeaks* peaks) {
  HY_RETURN_IF_ERROR(rollout_->LoadWeights(it, report));
  peaks->End(PhasePeaks::kSync);
  HY_RETURN_IF_ERROR(Rollout(it, exp, report));
  peaks->End(PhasePeaks::kRollout);
  // Idle until the next sync writes over them (the validating decoder's
  // too).
  rollout_->Release();
  if (decoder_ != nullptr) decoder_->Release();
  reference_in_use_->store(true);
  const std::function<void()> back_to_host = ReferenceOnDevice();
  const Status experience = ComputeExperience(it, exp, report);
  if (back_to_host) back_to_host();
  reference_in_use_->store(false);
  HY_RETURN_IF_ERROR(experience);
  ReportLogprobMismatch(*exp, report);
  peaks->End(PhasePeaks::kExperience);
  // The first write of the parameters and optimizer state since the
  // last checkpoint: it may still be reading them in place.
  WaitForCheckpointRead(report);
  ReleaseReference();  // Nothing reads it again before the experience.
  ReturnFreedHeap();
  HY_RETURN_IF_ERROR(Update(it, *exp, report));
  peaks->End(PhasePeaks::kUpdate);
  data_position_ += static_cast<uint64_t>(config_.rollout.batch_size);
  return Status::OK();
}

Status PpoWorker::CheckpointIteration(int64_t it, bool due, bool last,
                                      IterationReport* report) {
  if (due) {
    // What the step waits for: the previous checkpoint, and copying
    // this one's data, or with read_in_place its blobs only (the shards
    // are read in the background; the next update waits for that).
    const auto save_start = Clock::now();
    HY_RETURN_IF_ERROR(SaveCheckpoint(it + 1, report));
    checkpoint_blocking_s_ = Seconds(save_start);
    if (!config_.checkpoint.read_in_place || last) {
      ObserveCheckpointBlocking();
    }
  }
  checkpoint::CheckpointStatus cs = checkpointer_->status();
  report->checkpoint_step = cs.committed_step;
  report->checkpoint_durable_ms = cs.last_durable_seconds * 1000.0;
  if (awaiting_replicas_ && cs.in_flight_step != start_iteration_) {
    awaiting_replicas_ = false;  // The resume point's save has finished.
    const double secs = Seconds(replicate_start_);
    if (options_.metrics != nullptr) {
      options_.metrics->recovery_duration(metrics::RecoveryPhase::kReplicate)
          ->Observe(secs);
    }
    Log("recovery: step " + std::to_string(start_iteration_) +
        (cs.last_error.ok()
             ? " saved and replicated"
             : " not saved (" + cs.last_error.ToString() + ")") +
        " under the new layout, within " + std::to_string(secs) + " s");
  }
  NoteCheckpointFailures(cs, report);
  if (!cs.last_error.ok()) {
    report->checkpoint_state = "failed: " + cs.last_error.ToString();
  } else if (report->checkpoint_state.empty() &&
             cs.committed_step != reported_commit_) {
    report->checkpoint_state = "committed " + std::to_string(cs.committed_step);
  }
  reported_commit_ = cs.committed_step;
  return Status::OK();
}

Status PpoWorker::FinishRun(const std::vector<double>& rewards, int64_t end,
                            Clock::time_point run_start,
                            RunSummary* summary) {
  if (!rewards.empty()) {
    const size_t k = static_cast<size_t>(
        SummaryWindow(static_cast<int64_t>(rewards.size())));
    double first = 0, last = 0;
    for (size_t i = 0; i < k; ++i) {
      first += rewards[i];
      last += rewards[rewards.size() - 1 - i];
    }
    summary->first10_reward = first / static_cast<double>(k);
    summary->last10_reward = last / static_cast<double>(k);
    if (val_source_ != nullptr && summary->stopped_by == 0 &&
        summary->checkpoint_failure.empty()) {
      HY_ASSIGN_OR_RETURN(summary->val_end, Validate(end));
    }
  }
  const Status final_save = checkpointer_->Wait();
  if (!final_save.ok()) {
    // A peer that vanished is the launcher's to mend (a restart); a
    // checkpoint that cannot be written is the operator's: the run ends
    // and says what was lost.
    if (checkpoint::FailureCause(final_save) ==
        metrics::CheckpointFailureCause::kPeer) {
      return final_save;
    }
    if (summary->checkpoint_failure.empty()) {
      summary->checkpoint_failure =
          DescribeCheckpointFailure(checkpointer_->status().failed_step,
                                    final_save) +
          ResumeHint() + " [" + final_save.ToString() + "]";
    }
  }
  summary->checkpoint_step = checkpointer_->status().committed_step;
  summary->seconds = Seconds(run_start);
  summary->recovered_step = recovered_step_;
  // Stop watching before anyone leaves: rank 0 hosts the store.
  heartbeat_->Stop();
  return comm_->transport()->Barrier();
}

Status PpoWorker::StartRun(Clock::time_point run_start) {
  HY_RETURN_IF_ERROR(Setup());
  HY_RETURN_IF_ERROR(JoinNodes());
  HY_RETURN_IF_ERROR(ClaimRun());
  if (config_.trainer.offload_reference) {
    HY_RETURN_IF_ERROR(OffloadReference());
  }
  if (config_.trainer.offload_optimizer) {
    HY_RETURN_IF_ERROR(OffloadOptimizer());
  }
  StartHeartbeat();
  return RestoreOrStart(run_start);
}

Result<int64_t> PpoWorker::AgreeOnEnd(RunSummary* summary) {
  int64_t end = config_.trainer.total_iterations;
  if (options_.max_iterations >= 0) {
    end = std::min(end, start_iteration_ + options_.max_iterations);
  }
  // A stop that came while the run started (a Ctrl-C during start-up,
  // recovery or the SFT warm-up): nothing is trained, so nothing is saved;
  // a resume point's save in flight still completes below.
  if (early_stop_ == 0) {
    HY_ASSIGN_OR_RETURN(early_stop_, AgreeToStop());
  }
  if (early_stop_ != 0) {
    summary->stopped_by = early_stop_;
    end = start_iteration_;
    Log("stopping before the first iteration (signal " +
        std::to_string(early_stop_) + "): nothing trained");
  }
  return end;
}

Status PpoWorker::CompleteReport(Clock::time_point start,
                                 const Experience& exp,
                                 const PhasePeaks& peaks,
                                 IterationReport* report) {
  HY_RETURN_IF_ERROR(ReportPeaks(peaks, report));
  report->iteration_ms = Seconds(start) * 1000.0;
  if (options_.metrics != nullptr) {
    options_.metrics->iteration_duration->Observe(report->iteration_ms /
                                                  1000.0);
  }
  const double generated = exp.mask.sum().item<double>();
  report->tokens_per_second = generated * (1 + config_.actor.ppo_epochs) /
                              std::max(report->iteration_ms / 1000.0, 1e-9);
  return Status::OK();
}

void PpoWorker::StopAfter(int64_t it, int stop, RunSummary* summary) {
  if (stop == kStopCheckpointsFailing) {
    // The checkpoint in flight decides the count the line gives.
    checkpointer_->Wait().IgnoreError();
    IterationReport after;
    NoteCheckpointFailures(checkpointer_->status(), &after);
    // The cli says it.
    summary->checkpoint_failure = CheckpointStopLine(it + 1);
    return;
  }
  summary->stopped_by = stop;
  Log("stopping after iteration " + std::to_string(it) + " (signal " +
      std::to_string(stop) + ")" +
      (config_.checkpoint.save_every > 0
           ? ": step " + std::to_string(it + 1) + " saved"
           : ": checkpoint.save_every is 0, nothing saved"));
}

Result<bool> PpoWorker::RunIteration(int64_t it, int64_t end,
                                     std::vector<double>* rewards,
                                     RunSummary* summary) {
  const auto start = Clock::now();
  PhasePeaks peaks;  // Each phase's peak resident memory.
  IterationReport report;
  report.iteration = it;
  report.world_size = comm_->world_size();
  Experience exp;
  HY_RETURN_IF_ERROR(TrainIteration(it, &exp, &report, &peaks));
  HY_ASSIGN_OR_RETURN(const int stop, AgreeToStop());
  // Stopping because checkpoints keep failing: no further attempt.
  const bool unsaved_stop = stop == kStopCheckpointsFailing;
  const bool last = it + 1 == end || stop != 0;
  const int save_every = config_.checkpoint.save_every;
  HY_RETURN_IF_ERROR(CheckpointIteration(
      it,
      save_every > 0 && !unsaved_stop && ((it + 1) % save_every == 0 || last),
      last, &report));
  peaks.End(PhasePeaks::kCheckpoint);
  HY_RETURN_IF_ERROR(CompleteReport(start, exp, peaks, &report));
  if (summary->iterations == 0) summary->first_reward = report.reward_mean;
  summary->last_reward = report.reward_mean;
  rewards->push_back(report.reward_mean);
  ++summary->iterations;
  if (options_.on_iteration) options_.on_iteration(report);
  if (stop != 0) {
    StopAfter(it, stop, summary);
    return false;
  }
  const int test_freq = config_.trainer.test_freq;
  if (val_source_ != nullptr && it + 1 < end && test_freq > 0 &&
      (it + 1) % test_freq == 0) {
    HY_RETURN_IF_ERROR(Validate(it + 1).status());
  }
  return true;
}

Result<RunSummary> PpoWorker::Run() {
  const auto run_start = Clock::now();
  HY_RETURN_IF_ERROR(StartRun(run_start));
  RunSummary summary;
  summary.start_iteration = start_iteration_;
  summary.recovery_seconds = recovered_step_ >= 0 ? Seconds(run_start) : 0;
  summary.store_root = config_.checkpoint.store_root;
  HY_ASSIGN_OR_RETURN(const int64_t end, AgreeOnEnd(&summary));
  if (val_source_ != nullptr && start_iteration_ < end) {
    HY_ASSIGN_OR_RETURN(summary.val_start, Validate(start_iteration_));
  }
  std::vector<double> rewards;  // Per iteration run here.
  // Setup (and a resume) wrote the reference; nothing reads it before the
  // first experience, so the first sync and rollout run without it; the
  // same for the moments and the first update.
  ReleaseReference();
  ReleaseOptimizer();
  ReturnFreedHeap();
  for (int64_t it = start_iteration_; it < end; ++it) {
    HY_ASSIGN_OR_RETURN(const bool go_on,
                        RunIteration(it, end, &rewards, &summary));
    if (!go_on) break;
  }
  HY_RETURN_IF_ERROR(FinishRun(rewards, end, run_start, &summary));
  return summary;
}

Result<int> PpoWorker::AgreeToStop() {
  int mine = options_.stop_signal ? options_.stop_signal() : 0;
  if (mine <= 0 || mine >= kStopCheckpointsFailing) mine = mine != 0 ? 255 : 0;
  if (CheckpointsExhausted()) mine = kStopCheckpointsFailing;
  HY_ASSIGN_OR_RETURN(auto all, comm_->AllGatherBytes(
                                    {static_cast<uint8_t>(mine)}));
  // A rank whose checkpoints keep failing outvotes a signal: the signal's
  // stop would try to save once more.
  int stop = 0;
  for (const auto& a : all) {
    if (a.empty() || a[0] == 0) continue;
    if (a[0] == kStopCheckpointsFailing) return kStopCheckpointsFailing;
    if (stop == 0) stop = a[0];
  }
  return stop;
}

Result<RunSummary> RunWorker(const TrainConfig& config,
                             const WorkerOptions& options) {
  PpoWorker worker(config, options);
  return worker.Run();
}

}  // namespace hy::trainer
