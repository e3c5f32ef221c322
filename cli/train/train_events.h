// TrainEvents: the TensorBoard events files of a `hyctl train` run, written
// by rank 0 into <run root>/tensorboard/ (TensorBoardDir): every figure of
// the per-iteration JSON (IterationJson) as a scalar at the 1-based
// iteration, the checkpoint state ("saving 10", "committed 10") as text
// where there is one, the held-out validation figures at the number of
// iterations done before them, and the effective config as text.
//
// Each worker process writes a new file (metrics/tensorboard/event_writer.h)
// and flushes it after every iteration. Before its first point it writes a
// SessionLog START at its first iteration's step, so that TensorBoard (and
// `hyctl plot`) drop what an earlier process wrote from that step on: a run
// resumed or restarted from step k shows one point per step, the redone
// steps k+1.. from the new process. The validation at a resume's start
// (step k, before the START's step) is written only when no earlier
// process wrote one at step k, so that it too stays one point per step.
//
// Writing is best-effort and never stops training. A write error (a full
// disk) is reported once through `warn`; the writer's file is given up (it
// may end in a cut record, which readers skip) and what could not be
// written is kept in memory (at most kMaxPendingEvents reports) and written
// again, into a new file that starts with a START at its first step, once
// writing works again (tried at most every kRetrySeconds). So a run whose
// disk filled and was freed still shows one point per step.
//
// Ownership: owns its writer. Thread-safety: none; the worker's callbacks
// call it from one thread.

#ifndef HY_CLI_TRAIN_TRAIN_EVENTS_H_
#define HY_CLI_TRAIN_TRAIN_EVENTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hy/common/status.h"
#include "hy/metrics/tensorboard/event_writer.h"
#include "hy/trainer/ppo/worker.h"

namespace hy::cli {

// <run root>/tensorboard.
std::string TensorBoardDir(const std::string& run_root);

// The scalars of one iteration, tag -> value, every figure of
// IterationJson but the iteration (the step) and the checkpoint state
// (text, "checkpoint/state"): ppo/reward_mean, ppo/exact_match, ppo/kl,
// ppo/kl_coef, ppo/policy_loss, ppo/value_loss, ppo/entropy, ppo/clip_frac,
// ppo/grad_norm, ppo/response_length, ppo/correct_rate and
// ppo/format_rate (where the reward has those parts),
// throughput/tokens_per_second,
// time/rollout_ms, time/reward_ms, time/train_ms, time/iteration_ms,
// time/reshard_ms,
// reshard/bytes, reshard/logical_bytes, run/world_size, checkpoint/step,
// checkpoint/blocking_ms, checkpoint/durable_ms, memory/peak_rss_mb (the
// largest rank's), memory/peak_rss_mb/rank_<k> for each rank and
// memory/phase_peak_rss_mb/<phase> for each phase.
std::vector<metrics::tensorboard::TaggedValue> IterationScalars(
    const trainer::IterationReport& report);

// val/exact_match, val/reward_mean, val/prompts.
std::vector<metrics::tensorboard::TaggedValue> ValidationScalars(
    const trainer::ValidationReport& report);

class TrainEvents {
 public:
  static constexpr size_t kMaxPendingEvents = 100000;
  static constexpr double kRetrySeconds = 10;

  // Writes nothing until the first report. `config_yaml` is the effective
  // config; `warn` gets the one line about a failed write (may be null).
  // `retry_seconds`: how long after a failed write it tries again.
  TrainEvents(std::string run_root, std::string config_yaml,
              std::function<void(const std::string&)> warn,
              double retry_seconds = kRetrySeconds);

  void OnIteration(const trainer::IterationReport& report);
  void OnValidation(const trainer::ValidationReport& report);

  // The error writing is failing with; OK while it works.
  const Status& status() const { return status_; }
  // Reports not written yet (kept while writing fails).
  size_t pending() const { return pending_.size(); }


 private:
  // One report to write: scalars, or a text at `step`.
  struct Entry {
    int64_t step = 0;
    int64_t start_step = 0;  // The START a new file would begin with.
    std::vector<metrics::tensorboard::TaggedValue> values;
    std::string text_tag, text;
  };
  // Opens a new file, writes START and the config at `first_step`.
  Status Begin(int64_t first_step);
  // Writes what is pending (opening a file first if none is open).
  void Drain();
  void Fail(const Status& s);

  std::string dir_;
  std::string config_yaml_;
  std::function<void(const std::string&)> warn_;
  std::unique_ptr<metrics::tensorboard::EventWriter> writer_;
  // Steps of val/exact_match earlier processes left before this one's
  // START: a validation there is not written again.
  std::set<int64_t> earlier_validation_steps_;
  bool begun_ = false;  // The first Begin was tried.
  std::vector<Entry> pending_;
  bool dropped_ = false;  // Said that pending reports were dropped.
  double retry_seconds_;
  double retry_at_ = 0;  // Monotonic seconds; while failing.
  Status status_;
};

}  // namespace hy::cli

#endif  // HY_CLI_TRAIN_TRAIN_EVENTS_H_
