// RunWorker: one rank of a distributed PPO run (the body of each process
// hyctl train or torchrun starts). No LibTorch in this header.
//
// The rank and world come from torchrun's environment (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Per iteration the worker
//   1. reshards the actor from its training layout (fsdp=N, f32 master
//      shards) to its rollout layout (tp=t_g, dp=N/t_g, bf16) through
//      hy::reshard (bf16 wire, sparse delta after the first iteration);
//   2. generates responses with the TP-sharded actor, each dp group its
//      share of the prompts;
//   3. computes old / reference log-probs and values under FSDP, rewards,
//      the KL penalty and advantages (GAE or GRPO);
//   4. runs the PPO epochs over minibatches (FSDP: all-gather parameters,
//      reduce-scatter gradients, Adam on the local shard);
//   5. every checkpoint.save_every iterations saves the whole state with
//      SaveAsync and commits it across the ranks' stores in the background.
// The samples and the sampling randomness depend on (seed, iteration,
// global sample index) only, so a run resumed on any world size sees the
// same data.
//
// Thread-safety: one RunWorker per process.

#ifndef HY_TRAINER_PPO_WORKER_H_
#define HY_TRAINER_PPO_WORKER_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/trainer/config/config.h"

namespace hy::metrics {
struct HyMetrics;
}  // namespace hy::metrics

namespace hy::trainer {

// What one iteration did, identical on every rank (reductions are done
// before the report).
struct IterationReport {
  int64_t iteration = 0;  // 0-based PPO iteration just finished.
  int world_size = 1;
  double reward_mean = 0;
  double exact_match = 0;  // Fraction of responses with reward 1.
  // The reward's parts apart (reward.h RewardScore): the fraction of
  // responses whose answer is right, and of those in the expected form,
  // among the responses the reward says it of; NaN when it says it of none.
  double correct_rate = std::nan("");
  double format_rate = std::nan("");
  double kl = 0;           // Mean per-token logp - ref_logp (k1).
  double kl_coef = 0;
  double policy_loss = 0;
  double value_loss = 0;
  double entropy = 0;
  double clip_frac = 0;
  double grad_norm = 0;          // Actor, last minibatch, before clipping.
  double response_length = 0;    // Mean tokens per response.
  double tokens_per_second = 0;  // Generated + trained tokens / wall time.
  double rollout_ms = 0;
  double reward_ms = 0;  // Scoring the responses (a python reward's calls).
  double train_ms = 0;
  double iteration_ms = 0;
  double reshard_ms = 0;              // Train -> rollout, max over ranks.
  int64_t reshard_bytes = 0;          // Wire bytes, summed over ranks.
  int64_t reshard_logical_bytes = 0;  // Before delta, summed over ranks.
  // Rollout engine: "hy" (reshard_* above) or "vllm": the weights went
  // into the engines' shared file and were loaded by each engine
  // (weight_sync_*), and weight_version is the version (the trainer's
  // step) every engine reported before and after generating this
  // iteration's rollouts.
  std::string rollout_engine = "hy";
  int64_t weight_version = -1;
  double weight_sync_ms = 0;       // Ranks' writes + the engines' loads.
  // Written into the shared file by the ranks on its host, plus sent to
  // it over c10d by the others (deltas: rollout.vllm.delta), all ranks.
  int64_t weight_sync_bytes = 0;
  int64_t engine_restarts = 0;     // Engine failures recovered from, run.
  int64_t rollout_retries = 0;     // Engine shares redone this iteration.
  // |trainer's old log-prob - engine's log-prob| of the sampled tokens,
  // over the response tokens: the training-inference mismatch.
  double logprob_abs_diff_mean = 0;
  double logprob_abs_diff_max = 0;
  // Checkpointing: the newest committed step (-1 none yet), and what
  // happened this iteration: "" nothing, "saving N", "committed N",
  // "failed: ..." .
  int64_t checkpoint_step = -1;
  std::string checkpoint_state;
  double checkpoint_ms = 0;  // Time the training loop spent on it (copy).
  // The newest committed checkpoint's time from its start to its commit
  // (and replication) on rank 0: the durable time; 0 none yet.
  double checkpoint_durable_ms = 0;
  // Checkpoints that failed in this process so far, and why the one found
  // failed this iteration did (a hy_checkpoint_failures_total cause:
  // "no_space", "io", "peer", "other"; "" when none failed this
  // iteration).
  int64_t checkpoint_failures = 0;
  std::string checkpoint_failure_cause;
  // Per rank: its peak resident memory during this iteration (VmHWM, reset
  // at the iteration's start; from the process start where the kernel does
  // not allow the reset), MB.
  std::vector<double> peak_rss_mb;
  // Where that peak sits: per phase of the iteration, the highest peak
  // resident memory of any rank during it, MB (VmHWM reset at each phase's
  // start). Empty where the kernel does not allow the reset.
  struct PhasePeak {
    std::string phase;  // "sync", "rollout", "experience", "update",
                        // "checkpoint".
    double mb = 0;
  };
  std::vector<PhasePeak> phase_peak_rss_mb;
};

// Greedy decoding (temperature 0) of every data.val_files prompt by the
// current actor, scored by data.reward.
struct ValidationReport {
  int64_t iteration = 0;  // PPO iterations done before it.
  int64_t prompts = 0;
  double reward_mean = 0;
  double exact_match = 0;  // Fraction of prompts answered exactly.
};

// How many iterations at each end of a run of `iterations` the summary
// averages: 10, or half the run when it is shorter than 20, so that the
// two ends never overlap (at least 1).
inline int64_t SummaryWindow(int64_t iterations) {
  return iterations >= 20 ? 10 : std::max<int64_t>(1, iterations / 2);
}

struct RunSummary {
  int64_t start_iteration = 0;  // > 0 when resumed.
  int64_t iterations = 0;       // Run by this process.
  double first_reward = 0;      // Reward mean of the first iteration run.
  double last_reward = 0;
  // Reward means over the first and the last SummaryWindow(iterations)
  // iterations this process ran.
  double first10_reward = 0;
  double last10_reward = 0;
  // The validations before the first and after the last iteration run
  // (prompts == 0: no data.val_files).
  ValidationReport val_start, val_end;
  double seconds = 0;
  int64_t checkpoint_step = -1;  // Newest committed at the end.
  std::string store_root;
  int64_t recovered_step = -1;  // The step recovery resumed from; -1 none.
  double recovery_seconds = 0;  // Start-up to the first iteration.
  // The signal that stopped the run early (WorkerOptions::stop_signal), 0
  // when it ran to its end.
  int stopped_by = 0;
  // Set when the run ended with its state not saved: the final checkpoint
  // failed, or checkpoint.max_consecutive_failures failed in a row under
  // checkpoint.on_failure stop. Says which step was lost and which is the
  // newest saved; the cli exits kExitCheckpointFailed.
  std::string checkpoint_failure;
};

struct WorkerOptions {
  // Resume from the newest recoverable version under
  // config.checkpoint.store_root (any world size). Without it the root
  // must hold no committed version, unless this is a restart
  // (HY_RESTART_COUNT or TORCHELASTIC_RESTART_COUNT > 0 in the
  // environment): a restarted worker resumes whatever is committed and
  // starts fresh when nothing is.
  bool resume = false;
  // Take over stores under the root that record another run id
  // (hy/recovery/run_identity.h): resume or garbage-collect another job's
  // state on purpose. Not part of the config, so never carried into a
  // later resume.
  bool allow_other_run = false;
  // Stop after this many iterations (counting from the start or resume
  // point), regardless of total_iterations; -1: no limit. For tests that
  // interrupt a run.
  int64_t max_iterations = -1;
  // Where reshard / checkpoint / ppo metrics go (not owned; may be null).
  const metrics::HyMetrics* metrics = nullptr;
  // Called on every rank after each iteration (the cli prints rank 0's).
  std::function<void(const IterationReport&)> on_iteration;
  // Called on every rank after each validation (data.val_files).
  std::function<void(const ValidationReport&)> on_validation;
  // Log lines (setup, SFT progress, checkpoint events); may be null.
  std::function<void(const std::string&)> log;
  // Polled on every rank at the end of each PPO iteration; a non-zero
  // signal number asks the run to stop (a preemption). The ranks agree at
  // the first iteration end where any of them saw one, save and commit
  // that iteration (when checkpoint.save_every > 0), skip the final
  // validation and return with RunSummary::stopped_by set. May be null.
  std::function<int()> stop_signal;
};

// Runs one rank until total_iterations (or max_iterations) are done, or a
// stop is asked for (WorkerOptions::stop_signal), then waits for the last
// checkpoint to commit.
//
// Start-up (every start, first or restart): the ranks agree on their node
// ids (HY_NODE_ID if the launcher set it, else the node directories under
// the root in order, then fresh ones), start heartbeats, and run
// hy::recovery over the world transport: settle leftovers, choose the
// newest recoverable version, verify it and rebuild every rank's shards
// under the new world size. A resumed run checkpoints the rebuilt state at
// once (new layout, replicas restored) before it trains on. A lost heartbeat
// ends the process at once with recovery::kExitPeerFailed. Returns
// InvalidArgument for a bad config or environment (t_g not dividing the world
// size, a batch that does not fit), FailedPrecondition when resuming finds
// nothing to resume (or a fresh run finds a committed version already), and the
// transport's or store's error (DeadlineExceeded, Unavailable, DataLoss, ...)
// when a peer or the disk fails.
Result<RunSummary> RunWorker(const TrainConfig& config,
                             const WorkerOptions& options);

}  // namespace hy::trainer

#endif  // HY_TRAINER_PPO_WORKER_H_
