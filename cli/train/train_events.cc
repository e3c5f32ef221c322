#include "train/train_events.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
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
      {"time/reward_ms", r.reward_ms},
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
  // The reward's parts, where the reward has them (NaN: it has not).
  if (std::isfinite(r.correct_rate)) {
    v.push_back({"ppo/correct_rate", r.correct_rate});
  }
  if (std::isfinite(r.format_rate)) {
    v.push_back({"ppo/format_rate", r.format_rate});
  }
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
                         std::function<void(const std::string&)> warn,
                         double retry_seconds)
    : dir_(TensorBoardDir(run_root)),
      config_yaml_(std::move(config_yaml)),
      warn_(std::move(warn)),
      retry_seconds_(retry_seconds) {}

namespace {

double MonotonicSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void TrainEvents::Fail(const Status& s) {
  if (writer_ != nullptr) {
    // A file this process opened while failing holds only copies of what
    // is still pending: it goes. The first one keeps what it did write.
    const std::string path = writer_->path();
    writer_.reset();
    if (!status_.ok()) std::remove(path.c_str());
  }
  retry_at_ = MonotonicSeconds() + retry_seconds_;
  if (status_.ok() && warn_) {
    warn_("hyctl train: TensorBoard events cannot be written (" +
          s.ToString() +
          "); they are kept in memory and written again once they can be; "
          "training goes on");
  }
  status_ = s;
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

void TrainEvents::Drain() {
  if (pending_.empty()) return;
  if (writer_ == nullptr) {
    if (!status_.ok() && MonotonicSeconds() < retry_at_) return;
    if (const Status s = Begin(pending_.front().start_step); !s.ok()) {
      Fail(s);
      return;
    }
  }
  Status s;
  for (const Entry& e : pending_) {
    s = e.text_tag.empty() ? writer_->Scalars(e.step, e.values)
                           : writer_->Text(e.step, e.text_tag, e.text);
    if (!s.ok()) break;
  }
  if (s.ok()) s = writer_->Flush();
  if (!s.ok()) {
    Fail(s);
    return;
  }
  if (!status_.ok() && warn_) {
    warn_("hyctl train: TensorBoard events are written again (" +
          std::to_string(pending_.size()) + " report(s) written late)");
  }
  status_ = Status::OK();
  pending_.clear();
}

void TrainEvents::OnIteration(const trainer::IterationReport& r) {
  const int64_t step = r.iteration + 1;
  if (!begun_) {
    begun_ = true;
    if (const Status s = Begin(step); !s.ok()) Fail(s);
  }
  if (!r.checkpoint_state.empty()) {
    pending_.push_back({step, step, {}, "checkpoint/state", r.checkpoint_state});
  }
  pending_.push_back({step, step, IterationScalars(r), "", ""});
  if (pending_.size() > kMaxPendingEvents) {
    pending_.erase(pending_.begin(),
                   pending_.begin() + (pending_.size() - kMaxPendingEvents));
    if (!dropped_ && warn_) {
      warn_("hyctl train: TensorBoard events: more than " +
            std::to_string(kMaxPendingEvents) +
            " reports could not be written; the oldest are dropped");
    }
    dropped_ = true;
  }
  Drain();
}

void TrainEvents::OnValidation(const trainer::ValidationReport& r) {
  // The first validation of a process comes before its first iteration,
  // r.iteration + 1.
  if (!begun_) {
    begun_ = true;
    if (const Status s = Begin(r.iteration + 1); !s.ok()) Fail(s);
  }
  if (earlier_validation_steps_.count(r.iteration) == 0) {
    pending_.push_back(
        {r.iteration, r.iteration + 1, ValidationScalars(r), "", ""});
  }
  Drain();
}

}  // namespace hy::cli
