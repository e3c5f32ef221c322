// What `hyctl train` prints for each PPO iteration and at the end: a text
// progress line (fixed-width fields, so the columns line up), a JSON object
// (one per line, for -o json), and the final summary.
//
// Thread-safety: pure functions.

#ifndef HY_CLI_TRAIN_TRAIN_OUTPUT_H_
#define HY_CLI_TRAIN_TRAIN_OUTPUT_H_

#include <cstdint>
#include <string>

#include "hy/trainer/ppo/worker.h"

namespace hy::cli {

// "iter   3/40 reward 0.412 (exact 0.12) kl  0.0031 pg  -0.012 ..." with
// the 1-based iteration of `total_iterations` and the largest rank's peak
// RSS; no newline.
std::string IterationText(const trainer::IterationReport& report,
                          int64_t total_iterations);

// One JSON object on one line (no newline) with the keys iteration,
// reward_mean, exact_match, kl, kl_coef, policy_loss, value_loss, entropy,
// clip_frac, grad_norm, response_length, tokens_per_second, correct_rate,
// format_rate (null when the reward has no such part), rollout_ms,
// reward_ms, train_ms, iteration_ms, reshard_ms, reshard_bytes, reshard_logical_bytes,
// checkpoint_step, checkpoint_state, checkpoint_ms, checkpoint_durable_ms,
// peak_rss_mb (an array, one per rank). iteration counts from 1, as
// IterationText does (the report's 0-based index + 1: iteration N commits
// step N); NaN and infinities are written as null.
std::string IterationJson(const trainer::IterationReport& report);

// "val after 0 iterations: exact match 0.210, reward 0.210 (200 prompts,
// greedy)"; no newline.
std::string ValidationText(const trainer::ValidationReport& report);

// {"validation": {"iteration": 0, "prompts": 200, "reward_mean": 0.21,
// "exact_match": 0.21}} on one line; no newline.
std::string ValidationJson(const trainer::ValidationReport& report);

// "done: 40 iterations in 61.2 s, reward 0.213 -> 0.871 (mean of the
// first 10 iterations -> the last 10: 0.250 -> 0.800, 3.20x; halves of a
// run shorter than 20, trainer::SummaryWindow), val exact
// match 0.21 -> 0.80, checkpoint step 40, store runs/run-..."; the val part
// only with validations; no newline.
std::string SummaryText(const trainer::RunSummary& summary);

}  // namespace hy::cli

#endif  // HY_CLI_TRAIN_TRAIN_OUTPUT_H_
