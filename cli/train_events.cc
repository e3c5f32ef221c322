#include "train_events.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "hy/metrics/tensorboard/event_reader.h"

namespace hy::cli {

namespace tb = metrics::tensorboard;

std::string TensorBoardDir(const std::string& run_root) {
  return run_root + "/tensorboard";
}

std::vector<tb::TaggedValue> IterationScalars(
    const trainer::IterationReport& r) {
  std::vector<tb::TaggedValue> v = {
      {"ppo/reward_mean", r.reward_mean},
      {"ppo/exact_match", r.exact_match},
      {"ppo/kl", r.kl},
      {"ppo/kl_coef", r.kl_coef},
      {"ppo/policy_loss", r.policy_loss},
      {"ppo/value_loss", r.value_loss},
      {"ppo/entropy", r.entropy},
      {"ppo/clip_frac", r.clip_frac},
      {"ppo/grad_norm", r.grad_norm},
      {"ppo/response_length", r.response_length},
      {"throughput/tokens_per_second", r.tokens_per_second},
      {"time/rollout_ms", r.rollout_ms},
      {"time/train_ms", r.train_ms},
      {"time/iteration_ms", r.iteration_ms},
      {"time/reshard_ms", r.reshard_ms},
      {"reshard/bytes", static_cast<double>(r.reshard_bytes)},
      {"reshard/logical_bytes", static_cast<double>(r.reshard_logical_bytes)},
      {"run/world_size", static_cast<double>(r.world_size)},
      {"checkpoint/step", static_cast<double>(r.checkpoint_step)},
      {"checkpoint/blocking_ms", r.checkpoint_ms},
      {"checkpoint/durable_ms", r.checkpoint_durable_ms},
      {"checkpoint/failures", static_cast<double>(r.checkpoint_failures)},
  };
  if (r.rollout_engine != "hy") {
    v.push_back({"time/weight_sync_ms", r.weight_sync_ms});
    v.push_back({"rollout/weight_sync_bytes",
                 static_cast<double>(r.weight_sync_bytes)});
    v.push_back({"rollout/weight_version",
                 static_cast<double>(r.weight_version)});
    v.push_back({"rollout/logprob_abs_diff_mean", r.logprob_abs_diff_mean});
    v.push_back({"rollout/logprob_abs_diff_max", r.logprob_abs_diff_max});
    v.push_back({"rollout/engine_restarts",
                 static_cast<double>(r.engine_restarts)});
    v.push_back({"rollout/retries", static_cast<double>(r.rollout_retries)});
  }
  if (!r.peak_rss_mb.empty()) {
    v.push_back({"memory/peak_rss_mb", *std::max_element(r.peak_rss_mb.begin(),
                                                         r.peak_rss_mb.end())});
  }
  for (size_t k = 0; k < r.peak_rss_mb.size(); ++k) {
    v.push_back(
        {"memory/peak_rss_mb/rank_" + std::to_string(k), r.peak_rss_mb[k]});
  }
  for (const auto& p : r.phase_peak_rss_mb) {
    v.push_back({"memory/phase_peak_rss_mb/" + p.phase, p.mb});
  }
  return v;
}

std::vector<tb::TaggedValue> ValidationScalars(
    const trainer::ValidationReport& r) {
  return {{"val/exact_match", r.exact_match},
          {"val/reward_mean", r.reward_mean},
          {"val/prompts", static_cast<double>(r.prompts)}};
}

TrainEvents::TrainEvents(std::string run_root, std::string config_yaml,
                         std::function<void(const std::string&)> warn)
    : dir_(TensorBoardDir(run_root)),
      config_yaml_(std::move(config_yaml)),
      warn_(std::move(warn)) {}

void TrainEvents::Fail(const Status& s) {
  if (!status_.ok()) return;
  status_ = s;
  writer_.reset();
  if (warn_) {
    warn_("hyctl train: TensorBoard events are no longer written (" +
          s.ToString() + "); training goes on");
  }
}

Status TrainEvents::Begin(int64_t first_step) {
  // What earlier processes left (a resume, a restart): the validation
  // steps that this process's START keeps. A directory that cannot be read
  // back is no reason to stop writing: TensorBoard reads what it can.
  Result<tb::RunEvents> earlier = tb::ReadRunEvents(dir_);
  if (earlier.ok()) {
    auto it = earlier->scalars.find("val/exact_match");
    if (it != earlier->scalars.end()) {
      for (const tb::ScalarPoint& p : it->second) {
        if (p.step < first_step) earlier_validation_steps_.insert(p.step);
      }
    }
  } else if (!earlier.status().IsNotFound() && warn_) {
    warn_("hyctl train: reading the earlier TensorBoard events: " +
          earlier.status().ToString());
  }
  HY_ASSIGN_OR_RETURN(writer_, tb::EventWriter::Open(dir_));
  HY_RETURN_IF_ERROR(writer_->SessionStart(first_step));
  // Indented four spaces: a Markdown code block, as TensorBoard's text
  // plugin renders it.
  std::istringstream lines(config_yaml_);
  std::string line, markdown;
  while (std::getline(lines, line)) markdown += "    " + line + "\n";
  HY_RETURN_IF_ERROR(writer_->Text(first_step, "config", markdown));
  return writer_->Flush();
}

Status TrainEvents::Write(int64_t step,
                          const std::vector<tb::TaggedValue>& values) {
  HY_RETURN_IF_ERROR(writer_->Scalars(step, values));
  return writer_->Flush();
}

void TrainEvents::OnIteration(const trainer::IterationReport& r) {
  if (!status_.ok()) return;
  const int64_t step = r.iteration + 1;
  Status s = writer_ == nullptr ? Begin(step) : Status::OK();
  if (s.ok() && !r.checkpoint_state.empty()) {
    s = writer_->Text(step, "checkpoint/state", r.checkpoint_state);
  }
  if (s.ok()) s = Write(step, IterationScalars(r));
  if (!s.ok()) Fail(s);
}

void TrainEvents::OnValidation(const trainer::ValidationReport& r) {
  if (!status_.ok()) return;
  // The first validation of a process comes before its first iteration,
  // r.iteration + 1.
  Status s = writer_ == nullptr ? Begin(r.iteration + 1) : Status::OK();
  if (s.ok() && earlier_validation_steps_.count(r.iteration) == 0) {
    s = Write(r.iteration, ValidationScalars(r));
  }
  if (!s.ok()) Fail(s);
}

}  // namespace hy::cli
