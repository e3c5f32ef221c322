// PpoWorker: the state and steps of one rank of the PPO run that RunWorker
// (hy/trainer/ppo/worker.h) drives: the FSDP models (actor, reference, and a
// critic under GAE), the rollout engine (rollout_engine.h) the actor's
// weights go to each iteration, the checkpointer.
// Split over ppo_setup.cc (what is built before the first iteration, its
// rollout engines, a fresh start's weights), ppo_worker.cc (the loop),
// ppo_recovery.cc (nodes, run claim, heartbeat, resume, checkpoints),
// ppo_checkpoint_failure.cc (what a failed checkpoint says),
// ppo_memory.cc (phase peaks, the offloaded reference and optimizer),
// ppo_experience.cc (rollout and experience), ppo_validate.cc (greedy
// validation) and ppo_update.cc (the minibatch updates and SFT). The
// rollout engines are classes of their own: hy_decoder_engine.h (hy's
// decoder; validation always uses one) and vllm_engine.h (vLLM engines).
//
// Ownership: the worker owns its models, engines and checkpointer; the
// engines read the worker's comm, actor, config and sources through a
// RolloutContext (the worker outlives them).
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
#include "hy/trainer/config/device.h"
#include "hy/trainer/data/prompt_source.h"
#include "hy/trainer/model/comm.h"
#include "hy/trainer/model/fsdp.h"
#include "hy/trainer/model/fsdp_pass.h"
#include "hy/trainer/model/fsdp_unit.h"
#include "hy/trainer/model/offload.h"
#include "hy/trainer/ppo/advantage.h"
#include "hy/trainer/ppo/worker.h"
#include "rollout.h"
#include "rollout_engine.h"

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

// logprob_abs_diff_* of the report from exp's old and engine log-probs;
// nothing when exp has no engine log-probs.
void ReportLogprobMismatch(const Experience& exp, IterationReport* report);

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
  // Update's sums over this rank's rows of the minibatches' losses, each
  // divided by its minibatch's token count over all ranks.
  struct UpdateLosses {
    double policy = 0, value = 0, entropy = 0, clipped = 0;
  };
  // One SFT step's demonstrations: each prompt + response, the prompt's
  // length, the longest sequence, the response tokens over the batch.
  struct SftBatch {
    std::vector<std::vector<int>> seqs;
    std::vector<int64_t> prompt_lens;
    int64_t max_len = 0;
    double tokens = 0;
  };

  // ppo_setup.cc
  Status Setup();
  // Setup's steps. On a restart with a world the rollout's TP size does
  // not divide: the largest TP size that fits (and a line saying so).
  void FitTensorParallel();
  // comm_ on `device` (a longer timeout under rollout.engine vllm).
  Status MakeComm(Device device);
  // The actor, the critic (gae only), the reference, their units under
  // trainer.fsdp_per_layer, the KL controller.
  Status MakeModels();
  // The prompt sources, the run's tokens; InvalidArgument when the longest
  // prompt and response do not fit model.max_position_embeddings.
  Status MakeSources();
  // The rollout engine rollout.engine names and, when that is not hy's
  // decoder, the hy decoder that validates.
  Status MakeEngines();
  Status InitFresh();

  // ppo_worker.cc
  // The stop signal some rank saw (WorkerOptions::stop_signal), agreed
  // on by all ranks; 0 for none. Collective.
  // Or kStopCheckpointsFailing, when any rank's CheckpointsExhausted().
  Result<int> AgreeToStop();
  void Log(const std::string& line) const;  // Rank 0's, to options_.log.
  // Run's steps. Builds the worker (Setup), joins the nodes, claims the
  // run, offloads what the config offloads, starts the heartbeat, then
  // RestoreOrStart.
  Status StartRun(std::chrono::steady_clock::time_point run_start);
  // Recovers the newest step every part of which survives
  // (or starts fresh, or refuses a store that holds one without
  // --resume), then opens the checkpointer for the run's generation.
  Status RestoreOrStart(std::chrono::steady_clock::time_point run_start);
  // One iteration's training: the weights to the rollout, the rollout,
  // the experience, the update; each phase's peak into `peaks`.
  Status TrainIteration(int64_t it, Experience* exp, IterationReport* report,
                        PhasePeaks* peaks);
  // The iteration the run ends before: trainer.total_iterations, capped
  // by WorkerOptions::max_iterations; the start iteration (and
  // summary->stopped_by set, a line logged) when the ranks agree on a stop
  // that came during start-up. Collective.
  Result<int64_t> AgreeOnEnd(RunSummary* summary);
  // Iteration `it` of a run ending before `end`: trains it, agrees on a
  // stop, checkpoints, reports (options_.on_iteration), adds its reward to
  // `rewards` and the summary, validates when trainer.test_freq says so.
  // False when the run stops after it.
  Result<bool> RunIteration(int64_t it, int64_t end,
                            std::vector<double>* rewards, RunSummary* summary);
  // The report's memory peaks (ReportPeaks, collective), its time since
  // `start` (also observed in hy_iteration_seconds) and tokens per second
  // over exp's responses.
  Status CompleteReport(std::chrono::steady_clock::time_point start,
                        const Experience& exp, const PhasePeaks& peaks,
                        IterationReport* report);
  // The run stops after iteration `it` on the agreed `stop`: for
  // kStopCheckpointsFailing waits for the checkpoint in flight and puts
  // CheckpointStopLine in the summary, else records the signal in the
  // summary and logs what was saved.
  void StopAfter(int64_t it, int stop, RunSummary* summary);
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

  // ppo_experience.cc
  // The iteration's prompts and the rollout engine's responses to them.
  Status Rollout(int64_t iteration, Experience* exp, IterationReport* report);
  // The experience of exp's responses: old and reference log-probs,
  // values, rewards, advantages; the batch's figures into the report.
  // Collective.
  Status ComputeExperience(int64_t iteration, Experience* exp,
                           IterationReport* report);
  // ComputeExperience's steps. exp's old and reference log-probs and
  // (gae) values, zeros under grpo: each rank scores its rows, then the
  // rows are gathered on every rank. Collective.
  Status ScoreExperience(Experience* exp);
  // exp's scores by the reward (reward time and correct and format rates
  // into the report); returns how many responses scored exact.
  Result<double> ScoreRewards(Experience* exp, IterationReport* report);
  // The per-token rewards: the scores less the KL coefficient times the
  // KL of the old policy to the reference (algorithm.kl_penalty); reports
  // the coefficient used, then updates the KL controller.
  Result<TokenRewards> PenalisedRewards(const Experience& exp,
                                        const Mask& mask, const Shape2D& shape,
                                        IterationReport* report);
  // exp's advantages and returns from `token_rewards`: GAE over the
  // values, or GRPO over each prompt's rollout.n scores.
  Status ComputeAdvantages(const std::vector<float>& token_rewards,
                           const Mask& mask, const Shape2D& shape,
                           Experience* exp);
  // Forward of `model` (through `pass`) on rows [lo, hi) of exp:
  // per-response-token log-probs (actor) or values (critic) [hi - lo, R].
  Result<at::Tensor> ScoreRows(const FsdpModel& model, const FsdpPass& pass,
                               const Experience& exp, int64_t lo, int64_t hi,
                               at::Tensor* entropy);
  // A forward (and with `train` backward) pass over `model`: by layer
  // under trainer.fsdp_per_layer, else over the whole flat buffer.
  Result<std::unique_ptr<FsdpPass>> BeginPass(FsdpModel* model, bool train);

  // ppo_validate.cc
  // Loads the actor into the validating decoder (Decoder()) and decodes
  // every val_source_ prompt greedily; reports through
  // options_.on_validation.
  Result<ValidationReport> Validate(int64_t iteration);
  // hy's decoder: rollout_ under rollout.engine hy, else decoder_.
  RolloutEngine& Decoder();

  // ppo_update.cc
  // The PPO update of iteration `iteration` on exp: actor.ppo_epochs
  // passes over exp in minibatches (a permutation per epoch); the mean
  // losses, entropy, clip fraction and the last gradient norm into the
  // report. Collective.
  Status Update(int64_t iteration, const Experience& exp,
                IterationReport* report);
  // Update's steps. One minibatch (`batch`: rows of exp): this rank's part
  // of its rows to the device, then the actor's step and (gae) the
  // critic's. Returns the actor's gradient norm. Collective.
  Result<double> UpdateMinibatch(const Experience& exp,
                                 const std::vector<int64_t>& batch,
                                 UpdateLosses* losses);
  // The actor's step on `sub` (this rank's rows; null: none, the pass
  // idles) under the clipped policy loss less the entropy bonus, over
  // `tokens`. Returns the gradient norm. Collective.
  Result<double> UpdateActor(const Experience* sub, double tokens,
                             UpdateLosses* losses);
  // The critic's step on `sub` (null: none) under the clipped value loss
  // over `tokens`. Collective.
  Status UpdateCritic(const Experience* sub, double tokens,
                      UpdateLosses* losses);
  // trainer.sft_steps steps of supervised training of the actor on the
  // prompt source's demonstrations (at trainer.sft_lr), logging the loss
  // every 20 steps; the optimizer reset after. A stop the ranks agree on
  // ends it (early_stop_). Collective.
  Status SftWarmup();
  // SftWarmup's steps. The trainer.sft_batch_size demonstrations of SFT
  // step `step`.
  Result<SftBatch> DrawSftBatch(int step);
  // The loss of rows [lo, hi) of `batch` under `pass`: minus the response
  // tokens' log-probs, summed and divided by the batch's response tokens.
  Result<at::Tensor> SftLoss(const FsdpPass& pass, const SftBatch& batch,
                             int64_t lo, int64_t hi);
  // Logs the mean loss over the ranks of the steps since the last line
  // (ending at `step`) and the seconds since `start`, and zeroes
  // *loss_window. Collective.
  Status LogSftLoss(int step, std::chrono::steady_clock::time_point start,
                    double* loss_window);
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

  // The rollout engine (rollout.engine) and, under an engine other than
  // hy's, the hy decoder that validates (null under hy). Built by Setup.
  std::unique_ptr<RolloutEngine> rollout_;
  std::unique_ptr<RolloutEngine> decoder_;

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
