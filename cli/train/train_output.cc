#include "train/train_output.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace hy::cli {

std::string IterationText(const trainer::IterationReport& r,
                          int64_t total_iterations) {
  const int width = static_cast<int>(std::to_string(total_iterations).size());
  std::string ckpt = r.checkpoint_state;
  if (ckpt.rfind("failed", 0) == 0) {
    // The error itself was logged once, in words, when it happened.
    ckpt = "FAILED (" + std::to_string(r.checkpoint_failures) +
           " so far), newest saved " +
           (r.checkpoint_step < 0 ? std::string("none")
                                  : "step " + std::to_string(r.checkpoint_step));
  } else if (ckpt.empty()) {
    ckpt = r.checkpoint_step < 0 ? "-"
                                 : "step " + std::to_string(r.checkpoint_step);
  }
  // The phase whose peak is the iteration's, where known.
  std::string where;
  double most = -1;
  for (const auto& p : r.phase_peak_rss_mb) {
    if (p.mb > most) {
      most = p.mb;
      where = " (" + p.phase + ")";
    }
  }
  const bool vllm = r.rollout_engine == "vllm";
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "iter %*" PRId64 "/%" PRId64
                " reward %.3f (exact %.2f) kl %7.4f pg %7.3f vf %6.3f ent "
                "%5.2f tok/s %6.0f %s %6.1f ms (%5.2f MB) rss %5.0f MB%s "
                "ckpt ",
                width, r.iteration + 1, total_iterations, r.reward_mean,
                r.exact_match, r.kl, r.policy_loss, r.value_loss, r.entropy,
                r.tokens_per_second, vllm ? "sync" : "reshard",
                vllm ? r.weight_sync_ms : r.reshard_ms,
                (vllm ? r.weight_sync_bytes : r.reshard_bytes) / 1e6,
                r.peak_rss_mb.empty() ? 0.0
                                      : *std::max_element(r.peak_rss_mb.begin(),
                                                          r.peak_rss_mb.end()),
                where.c_str());
  return buf + ckpt;
}

std::string IterationJson(const trainer::IterationReport& r) {
  nlohmann::ordered_json j;
  j["iteration"] = r.iteration + 1;  // As the text counts: 1 is the first.
  j["reward_mean"] = r.reward_mean;
  j["exact_match"] = r.exact_match;
  j["kl"] = r.kl;
  j["kl_coef"] = r.kl_coef;
  j["policy_loss"] = r.policy_loss;
  j["value_loss"] = r.value_loss;
  j["entropy"] = r.entropy;
  j["clip_frac"] = r.clip_frac;
  j["grad_norm"] = r.grad_norm;
  j["response_length"] = r.response_length;
  j["tokens_per_second"] = r.tokens_per_second;
  j["correct_rate"] = r.correct_rate;
  j["format_rate"] = r.format_rate;
  j["rollout_ms"] = r.rollout_ms;
  j["reward_ms"] = r.reward_ms;
  j["train_ms"] = r.train_ms;
  j["iteration_ms"] = r.iteration_ms;
  j["reshard_ms"] = r.reshard_ms;
  j["reshard_bytes"] = r.reshard_bytes;
  j["reshard_logical_bytes"] = r.reshard_logical_bytes;
  j["rollout_engine"] = r.rollout_engine;
  if (r.rollout_engine != "hy") {
    j["weight_version"] = r.weight_version;
    j["weight_sync_ms"] = r.weight_sync_ms;
    j["weight_sync_bytes"] = r.weight_sync_bytes;
    j["engine_restarts"] = r.engine_restarts;
    j["rollout_retries"] = r.rollout_retries;
    j["logprob_abs_diff_mean"] = r.logprob_abs_diff_mean;
    j["logprob_abs_diff_max"] = r.logprob_abs_diff_max;
  }
  j["world_size"] = r.world_size;
  j["checkpoint_step"] = r.checkpoint_step;
  j["checkpoint_state"] = r.checkpoint_state;
  j["checkpoint_ms"] = r.checkpoint_ms;
  j["checkpoint_durable_ms"] = r.checkpoint_durable_ms;
  j["checkpoint_failures"] = r.checkpoint_failures;
  j["checkpoint_failure_cause"] = r.checkpoint_failure_cause;
  j["peak_rss_mb"] = r.peak_rss_mb;
  nlohmann::ordered_json phases = nlohmann::ordered_json::object();
  for (const auto& p : r.phase_peak_rss_mb) phases[p.phase] = p.mb;
  j["phase_peak_rss_mb"] = phases;
  // NaN / inf dump as null; invalid UTF-8 in a state message is replaced.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ValidationText(const trainer::ValidationReport& r) {
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "val after %" PRId64
                " iterations: exact match %.3f, reward %.3f (%" PRId64
                " prompts, greedy)",
                r.iteration, r.exact_match, r.reward_mean, r.prompts);
  return buf;
}

std::string ValidationJson(const trainer::ValidationReport& r) {
  nlohmann::ordered_json v;
  v["iteration"] = r.iteration;
  v["prompts"] = r.prompts;
  v["reward_mean"] = r.reward_mean;
  v["exact_match"] = r.exact_match;
  nlohmann::ordered_json j;
  j["validation"] = v;
  return j.dump();
}

std::string SummaryText(const trainer::RunSummary& s) {
  char buf[384];
  int n = std::snprintf(buf, sizeof(buf),
                        "done: %" PRId64
                        " iterations in %.1f s, reward %.3f -> %.3f",
                        s.iterations, s.seconds, s.first_reward, s.last_reward);
  if (s.iterations > 1) {
    const int64_t k = trainer::SummaryWindow(s.iterations);
    n += std::snprintf(buf + n, sizeof(buf) - n,
                       " (mean of the first %" PRId64
                       " iterations -> the last %" PRId64 ": %.3f -> %.3f",
                       k, k, s.first10_reward, s.last10_reward);
    if (s.first10_reward > 0) {
      n += std::snprintf(buf + n, sizeof(buf) - n, ", %.2fx",
                         s.last10_reward / s.first10_reward);
    }
    n += std::snprintf(buf + n, sizeof(buf) - n, ")");
  }
  std::string out = buf;
  if (s.val_start.prompts > 0 && s.val_end.prompts > 0) {
    std::snprintf(buf, sizeof(buf), ", val exact match %.3f -> %.3f",
                  s.val_start.exact_match, s.val_end.exact_match);
    out += buf;
  }
  if (s.start_iteration > 0) {
    out += " (resumed at iteration " + std::to_string(s.start_iteration) + ")";
  }
  out += ", checkpoint step " + (s.checkpoint_step < 0
                                     ? std::string("none")
                                     : std::to_string(s.checkpoint_step));
  return out + ", store " + s.store_root;
}

}  // namespace hy::cli
