// PpoWorker: the state and steps of one rank of the PPO run that RunWorker
// (hy/trainer/ppo/worker.h) drives: the FSDP models (actor, reference, and a
// critic under GAE), the rollout shards of the actor and the reshard
// executor that fills them, the checkpointer.
// Split over ppo_setup.cc (what is built before the first iteration, a
// fresh start's weights), ppo_worker.cc (the loop), ppo_recovery.cc
// (nodes, run claim, heartbeat, resume, checkpoints),
// ppo_checkpoint_failure.cc (what a failed checkpoint says),
// ppo_memory.cc (phase peaks, the offloaded reference), ppo_experience.cc
// (rollout and experience), ppo_vllm.cc (rollouts on vLLM engines),
// ppo_validate.cc (greedy validation) and ppo_update.cc (the minibatch
// updates and SFT).
//
// Internal to hy_trainer_ppo. Thread-safety: one thread.

#ifndef HY_TRAINER_PPO_PPO_WORKER_H_
#define HY_TRAINER_PPO_PPO_WORKER_H_

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hy/checkpoint/checkpoint.h"
#include "hy/recovery/heartbeat.h"
#include "hy/recovery/recovery.h"
#include "hy/reshard/executor.h"
#include "hy/reshard/nccl_executor.h"
#include "hy/trainer/data/prompt_source.h"
#include "hy/trainer/model/comm.h"
#include "hy/trainer/model/fsdp.h"
#include "hy/trainer/model/fsdp_pass.h"
#include "hy/trainer/model/fsdp_unit.h"
#include "hy/trainer/model/offload.h"
#include "hy/trainer/ppo/advantage.h"
#include "hy/trainer/ppo/worker.h"
#include "hy/trainer/vllm/engine_client.h"
#include "hy/trainer/vllm/weight_file.h"
#include "rollout.h"

namespace hy::trainer {

// One iteration's batch after rollout, identical on every rank.
struct Experience {
  std::vector<Prompt> items;  // Per response (prompt repeated n times).
  PromptBatch prompts;        // [B, P]
  at::Tensor responses;       // [B, R] int64
  at::Tensor mask;            // [B, R] f32
  at::Tensor old_logp, ref_logp, values;  // [B, R] f32
  at::Tensor advantages, returns;         // [B, R] f32
  at::Tensor engine_logp;  // [B, R] f32: the vLLM engine's; else undefined.
  std::vector<float> scores;              // [B]
};

// True when this process is a restart (HY_RESTART_COUNT or
// TORCHELASTIC_RESTART_COUNT > 0).
bool IsRestart();

// The peak resident memory of each phase of one iteration: VmHWM read and
// reset at each phase's end (construction resets it first). Thread-safety:
// one thread.
class PhasePeaks {
 public:
  enum Phase { kSync, kRollout, kExperience, kUpdate, kCheckpoint, kNumPhases };
  PhasePeaks();
  // Records the phase's peak (MB) and starts the next one.
  void End(Phase phase);
  double mb(Phase phase) const { return mb_[phase]; }
  // Whether every reset worked (the kernel may not allow it).
  bool ok() const { return ok_; }

 private:
  double mb_[kNumPhases] = {};
  bool ok_;
};

// AgreeToStop's value when the ranks stop because checkpoints keep failing
// (checkpoint.on_failure stop); signal numbers are below it.
inline constexpr int kStopCheckpointsFailing = 200;

class PpoWorker {
 public:
  PpoWorker(const TrainConfig& config, const WorkerOptions& options);
  ~PpoWorker();

  Result<RunSummary> Run();

 private:
  // ppo_setup.cc
  Status Setup();
  Status InitFresh();

  // ppo_worker.cc
  // The stop signal some rank saw (WorkerOptions::stop_signal), agreed
  // on by all ranks; 0 for none. Collective.
  // Or kStopCheckpointsFailing, when any rank's CheckpointsExhausted().
  Result<int> AgreeToStop();
  void Log(const std::string& line) const;  // Rank 0's, to options_.log.
  // Run's steps. Recovers the newest step every part of which survives
  // (or starts fresh, or refuses a store that holds one without
  // --resume), then opens the checkpointer for the run's generation.
  Status RestoreOrStart(std::chrono::steady_clock::time_point run_start);
  // One iteration's training: the weights to the rollout, the rollout,
  // the experience, the update; each phase's peak into `peaks`.
  Status TrainIteration(int64_t it, Experience* exp, IterationReport* report,
                        PhasePeaks* peaks);
  // After iteration `it`: saves step it + 1 when `due`, and puts the
  // checkpointer's state (committed step, failures, the resume point's
  // replication) into the report.
  Status CheckpointIteration(int64_t it, bool due, bool last,
                             IterationReport* report);
  // The end of a run that trained `rewards` (one per iteration, ending at
  // `end`): the summary's reward windows and last validation, the last
  // checkpoint waited for, the run's seconds since `run_start`, the
  // heartbeat stopped, a barrier.
  Status FinishRun(const std::vector<double>& rewards, int64_t end,
                   std::chrono::steady_clock::time_point run_start,
                   RunSummary* summary);

  // ppo_recovery.cc
  // Adopts trainer.state / trainer.config of the version being resumed.
  Status ApplyStoredState(const std::string& state_text,
                          const std::string& config_text);
  // Agrees on every rank's node id by host identity (nodes_, hosts_;
  // hy/recovery/node_identity.h), records the host and writes the pid file.
  Status JoinNodes();
  // Claims this rank's node stores for the run id of the environment
  // (hy/recovery/run_identity.h); every rank fails if any node holds
  // another run's stores (FailedPrecondition).
  Status ClaimRun();
  // Collective: whether any rank is a restart (IsRestart()).
  Result<bool> AnyRankRestarted();
  void StartHeartbeat();
  // Rebuilds this rank's shards of the chosen version.
  Status ResumeFrom(recovery::Recovery* rec);
  Status SaveCheckpoint(int64_t next_iteration, IterationReport* report);
  // Before an update: waits until the checkpoint in flight no longer reads
  // the parameters and optimizer state (checkpoint.read_in_place), adds
  // the wait to the report and completes that checkpoint's blocking time.
  void WaitForCheckpointRead(IterationReport* report);

  // ppo_checkpoint_failure.cc
  // "checkpoint: step N not saved: <why, naming the store root and, for a
  // full disk, its free space>; newest saved step M".
  std::string DescribeCheckpointFailure(int64_t step,
                                        const Status& error) const;
  // Fills the report's failure count and, for each checkpoint found failed
  // since the last call, logs one line (rank 0) and sets its cause.
  void NoteCheckpointFailures(const checkpoint::CheckpointStatus& cs,
                              IterationReport* report);
  // Whether checkpoint.on_failure stop asks this rank to stop: the last
  // max_consecutive_failures checkpoints failed.
  bool CheckpointsExhausted() const;
  // What the run says when it stops for that, after `iterations_done`.
  std::string CheckpointStopLine(int64_t iterations_done) const;
  // ". Make room ... and continue with hyctl train --resume <root>".
  std::string ResumeHint() const;

  // Records checkpoint_blocking_s_ in hy_checkpoint_blocking_seconds.
  void ObserveCheckpointBlocking();

  // ppo_memory.cc
  // Collective: every rank's peak of the iteration (the largest of its
  // phases) into report->peak_rss_mb, and each phase's largest peak over
  // the ranks into report->phase_peak_rss_mb (left empty if a rank could
  // not reset its peak). Returns comm errors.
  Status ReportPeaks(const PhasePeaks& peaks, IterationReport* report);
  // Hands the heap memory freed so far back to the system (glibc keeps it
  // for reuse: blocks under the mmap threshold, in each thread's arena),
  // so that the update's peak does not sit on the rollout's and the
  // experience's leftovers.
  void ReturnFreedHeap();
  // This rank's node directory (beside its store): where the offloaded
  // state's files go.
  std::string NodeDirectory() const;
  // trainer.offload_reference: moves the reference piece into a file
  // mapping in this rank's node directory (ref_offload_); on a GPU into
  // page-locked host memory (ref_host_), copied to the device for each
  // experience phase (ReferenceOnDevice). Returns its IOError (disk full,
  // no such directory).
  Status OffloadReference();
  // On a GPU with the reference offloaded: puts a device copy of it in
  // ref_'s params for the experience phase and returns what puts the host
  // copy back; a no-op otherwise.
  std::function<void()> ReferenceOnDevice();
  // Hands the offloaded reference's pages back to the kernel; an error is
  // logged (the values are never lost).
  void ReleaseReference();
  // The offloaded reference, if the reference's piece is still it (null
  // otherwise).
  const OffloadedTensor* OffloadedReference() const;
  // For a checkpoint of the offloaded reference's shards (views of its
  // mapping): sets their after_chunk_read to hand each chunk's pages back
  // once the save has read it, and returns the Checkpointer's after_read
  // that hands back the rest. Null, and nothing set, when the reference is
  // not offloaded.
  std::function<void()> ReleaseReferenceAsRead(
      std::vector<statestore::ShardData>* ref_shards) const;
  // trainer.offload_optimizer: moves the actor's and the critic's Adam
  // moments into a file mapping in this rank's node directory
  // (FsdpModel::OffloadMoments). Returns its IOError.
  Status OffloadOptimizer();
  // Hands the offloaded moments' pages back to the kernel (after setup or
  // a resume wrote them, after a save copied them); an error is logged
  // (the values are never lost). Nothing without offload.
  void ReleaseOptimizer();
  // This rank's rollout shards (bf16): views of one file
  // mapping in the node directory under trainer.offload_rollout
  // (rollout_offload_), else of heap memory. Returns the mapping's IOError.
  Status AllocateRolloutShards();
  // trainer.offload_rollout: hands the rollout shards' pages back to the
  // kernel once generation is done; an error is logged (the values stay).
  void ReleaseRollout();
  // trainer.offload_rollout: parks the reshard executor (its last-sent
  // copies to a file in the node directory) until the next sync; an error
  // is logged (the next sync then sends everything).
  void ParkReshard();

  // ppo_experience.cc
  Status ReshardToRollout(IterationReport* report);
  Status Rollout(int64_t iteration, Experience* exp, IterationReport* report);
  // Responses [items, R] to `items` (prompts of at most prompt_len tokens)
  // from the rollout weights, each dp group generating its share; the
  // same on every rank.
  Result<at::Tensor> GenerateAll(const std::vector<Prompt>& items,
                                 int64_t prompt_len, uint64_t iteration,
                                 const RolloutConfig& rc);
  Status ComputeExperience(int64_t iteration, Experience* exp,
                           IterationReport* report);
  // Forward of `model` (through `pass`) on rows [lo, hi) of exp:
  // per-response-token log-probs (actor) or values (critic) [hi - lo, R].
  Result<at::Tensor> ScoreRows(const FsdpModel& model, const FsdpPass& pass,
                               const Experience& exp, int64_t lo, int64_t hi,
                               at::Tensor* entropy);
  // A forward (and with `train` backward) pass over `model`: by layer
  // under trainer.fsdp_per_layer, else over the whole flat buffer.
  Result<std::unique_ptr<FsdpPass>> BeginPass(FsdpModel* model, bool train);

  // ppo_vllm.cc (rollout.engine vllm)
  // The shared weight file (rank 0 creates it), the plan into it, and on
  // rank 0 the engines' clients. Collective.
  Status SetupEngines();
  // Writes this rank's piece into the file; rank 0 has every engine load
  // it as `version`. Collective; rank 0's error on every rank.
  Status SyncEngines(int64_t version, IterationReport* report);
  // Responses [items, R] and the engines' log-probs of them, the same on
  // every rank. Collective.
  Result<at::Tensor> GenerateOnEngines(const std::vector<Prompt>& items,
                                       uint64_t iteration,
                                       const RolloutConfig& rc,
                                       at::Tensor* logprobs,
                                       IterationReport* report);
  // Rank 0: engine e's share, redone (engine revived and reloaded) until
  // it is generated by the current version from start to end.
  Status GenerateOnEngine(size_t e, const std::vector<SampleRequest>& requests,
                          const SamplingParams& params,
                          std::vector<SampleResult>* out, int64_t* retries);
  // Rank 0: engine e loads the file as engine_version_ (reviving it when
  // it is unavailable, up to rollout.vllm.max_restarts times).
  Status LoadEngine(size_t e);
  // Rank 0: waits (rollout.vllm.start_timeout_s) until engine e answers
  // again after `why`. starting: e has not answered yet (hyctl train starts
  // engines beside the workers): nothing is killed or counted as a restart.
  // Otherwise a request that timed out (hung, on its first load too) kills
  // e first, for the keeper to restart it.
  Status ReviveEngine(size_t e, const Status& why, bool starting);
  void KillEngine(size_t e);
  Status ForEachEngine(const std::function<Status(size_t)>& fn);
  // Rank 0's status on every rank. Collective.
  Status ShareStatus(const Status& mine);
  // logprob_abs_diff_* of the report from exp's old and engine log-probs.
  void ReportMismatch(const Experience& exp, IterationReport* report) const;
  bool on_vllm() const { return config_.rollout.engine == "vllm"; }

  // ppo_validate.cc
  // Reshards the actor to the rollout layout and decodes every
  // val_source_ prompt greedily; reports through options_.on_validation.
  Result<ValidationReport> Validate(int64_t iteration);

  // ppo_update.cc
  Status Update(int64_t iteration, const Experience& exp,
                IterationReport* report);
  Status SftWarmup();
  // Takes the pass's gradient piece (summed over ranks), clips by the
  // global norm and steps Adam. Returns the norm before clipping.
  Result<double> ApplyGradient(FsdpModel* model, FsdpPass* pass,
                               const OptimConfig& optim);

  // This rank's part [lo, hi) of `count` items split evenly over ranks.
  void Split(int64_t count, int64_t* lo, int64_t* hi) const;

  TrainConfig config_;
  WorkerOptions options_;
  std::unique_ptr<Comm> comm_;
  std::unique_ptr<FsdpModel> actor_, critic_, ref_;  // critic_: gae only.
  // trainer.fsdp_per_layer: each model's units; null otherwise.
  std::unique_ptr<FsdpUnits> actor_units_, critic_units_, ref_units_;
  std::unique_ptr<OffloadedTensor> ref_offload_;  // Null unless offloaded.
  at::Tensor ref_host_;  // On a GPU, offloaded: the pinned host copy.
  // Set while the experience phase reads the reference: a checkpoint's
  // hooks then leave its pages be (shared with those callbacks).
  std::shared_ptr<std::atomic<bool>> reference_in_use_ =
      std::make_shared<std::atomic<bool>>(false);
  std::unique_ptr<OffloadedTensor> rollout_offload_;  // Likewise.
  std::unique_ptr<KlController> kl_;
  std::unique_ptr<PromptSource> source_;
  std::unique_ptr<PromptSource> val_source_;  // data.val_files; may be null.
  int64_t start_iteration_ = 0;
  uint64_t data_position_ = 0;  // Stream position of the next unseen prompt.
  std::vector<int> nodes_;      // Node id of each rank.
  std::vector<std::string> hosts_;  // Hostname of each rank.
  std::string run_id_;              // "" when the environment names none.
  std::unique_ptr<recovery::Heartbeat> heartbeat_;
  int64_t recovered_step_ = -1;
  bool awaiting_replicas_ = false;  // The resume point's save in flight.
  int64_t reported_commit_ = -1;  // The committed step the last report gave.
  uint64_t failures_seen_ = 0;  // Checkpoint failures reported so far.
  // The stop signal the ranks agreed on during the SFT warm-up; 0 none.
  int early_stop_ = 0;
  std::chrono::steady_clock::time_point replicate_start_;

  // Rollout side.
  std::shared_ptr<const reshard::TransferPlan> plan_;
  std::unique_ptr<reshard::Executor> executor_;           // On the CPU.
  std::unique_ptr<reshard::NcclExecutor> nccl_executor_;  // On a GPU.
  std::vector<at::Tensor> rollout_shards_;  // Per actor tensor, bf16.
  Weights rollout_weights_;

  // rollout.engine vllm.
  WeightFileLayout weight_layout_;
  std::string weight_manifest_;
  // Mapped on the engines' host (rank 0's) only; null on the others.
  std::unique_ptr<SharedWeightFile> weight_file_;
  std::shared_ptr<const reshard::TransferPlan> engine_plan_;
  // The ranks on other hosts than rank 0's send their pieces to rank 0
  // over c10d, which writes them into the file: this plan's part from
  // them, and its executor (null when every rank shares rank 0's host).
  std::shared_ptr<const reshard::TransferPlan> engine_remote_plan_;
  std::unique_ptr<reshard::Executor> engine_executor_;
  std::vector<std::unique_ptr<EngineClient>> engines_;  // Rank 0.
  std::string engine_dir_;  // Engines' pid files (hyctl train's); or "".
  int64_t engine_version_ = -1;
  int64_t engine_restarts_ = 0;
  // Resumed: the engines' version the checkpoint recorded (-1: none).
  int64_t saved_engine_version_ = -1;
  std::vector<bool> engine_loaded_;  // Has loaded weights once (rank 0).

  std::unique_ptr<checkpoint::Checkpointer> checkpointer_;
  // What training has waited for the checkpoint in flight so far (its
  // Save call, then the wait before the next update); < 0: none pending.
  double checkpoint_blocking_s_ = -1;
  std::string rules_yaml_;
  std::string hf_config_text_;  // config.json of model.path, if any.
  std::string tokens_text_;     // RunTokensJson of source_ (run_tokens.h).
};

// Store tensor-name prefixes.
inline constexpr const char* kActorPrefix = "actor";
inline constexpr const char* kCriticPrefix = "critic";
inline constexpr const char* kRefPrefix = "reference";

// The default split rules with every pattern prefixed by the state's
// "<model>/[exp_avg/|exp_avg_sq/]" names: what commit records carry.
std::string StateRulesYaml();

}  // namespace hy::trainer

#endif  // HY_TRAINER_PPO_PPO_WORKER_H_
