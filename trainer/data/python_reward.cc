// python: a reward function written in Python, run by a worker process
// (python -m hy_reward.serve FILE FUNCTION) that this object starts and
// talks to in JSON lines (reward.h; python/hy_reward/serve.py has the
// protocol).

#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "hy/common/child_process.h"
#include "reward_impl.h"

namespace hy::trainer {
namespace {

using Json = nlohmann::json;

#ifndef HY_SOURCE_PYTHON_DIR
#define HY_SOURCE_PYTHON_DIR ""
#endif
#ifndef HY_DEFAULT_REWARD_PYTHON
#define HY_DEFAULT_REWARD_PYTHON "python3"
#endif

Json RequestOf(const std::vector<RewardInput>& inputs) {
  Json sources = Json::array(), responses = Json::array(),
       truths = Json::array(), extras = Json::array();
  for (const RewardInput& in : inputs) {
    Json extra = Json::object();
    std::string source;
    if (in.fields != nullptr) {
      for (const auto& [k, v] : *in.fields) {
        if (k == "data_source") {
          source = v;
        } else if (k != "answer") {
          extra[k] = v;
        }
      }
    }
    extra["prompt"] = std::string(in.prompt);
    extra["ended_with_eos"] = in.ended_with_eos;
    extra["index"] = in.index;
    sources.push_back(source);
    responses.push_back(std::string(in.response));
    truths.push_back(std::string(in.answer));
    extras.push_back(std::move(extra));
  }
  return Json{{"data_sources", sources},
              {"solution_strs", responses},
              {"ground_truths", truths},
              {"extra_infos", extras}};
}

class PythonReward final : public RewardFunction {
 public:
  PythonReward(std::string file, std::string function,
               std::unique_ptr<ChildProcess> worker)
      : file_(std::move(file)),
        function_(std::move(function)),
        worker_(std::move(worker)) {}

  double Score(const RewardInput& input) const override {
    auto r = ScoreBatch({input});
    return r.ok() ? r->front().score
                  : std::numeric_limits<double>::quiet_NaN();
  }

  Result<std::vector<RewardScore>> ScoreBatch(
      const std::vector<RewardInput>& inputs) const override {
    if (inputs.empty()) return std::vector<RewardScore>();
    const std::string request =
        RequestOf(inputs).dump(-1, ' ', false, Json::error_handler_t::replace);
    std::lock_guard<std::mutex> lock(mu_);
    const std::string who = "reward " + function_ + " in " + file_;
    if (Status s = worker_->WriteLine(request); !s.ok()) {
      return Status::Unavailable(who + ": its worker is gone (" +
                                 std::string(s.message()) + ")");
    }
    auto line = worker_->ReadLine();
    if (!line.ok()) {
      return Status::Unavailable(who + ": its worker is gone (it exited " +
                                 std::to_string(worker_->Wait()) + ")");
    }
    const Json answer = Json::parse(*line, nullptr, /*allow_exceptions=*/false);
    if (answer.is_discarded() || !answer.is_object()) {
      return Status::Internal(who + ": the worker wrote a line that is not "
                              "a JSON object");
    }
    if (answer.contains("error")) {
      const Json& index = answer["index"];
      std::string sample = "a batch of " + std::to_string(inputs.size()) +
                           " samples";
      if (index.is_number_integer() && index.get<int64_t>() >= 0 &&
          index.get<size_t>() < inputs.size()) {
        const RewardInput& in = inputs[index.get<size_t>()];
        sample = !in.source.empty()
                     ? std::string(in.source)
                     : "sample " + std::to_string(index.get<int64_t>());
        sample += " (response " + Json(std::string(in.response)).dump() + ")";
      }
      return Status::InvalidArgument(sample + ": " + who + ": " +
                                     answer["error"].get<std::string>());
    }
    const Json values = answer.value("scores", Json());
    const Json correct = answer.value("correct", Json());
    if (!values.is_array() || values.size() != inputs.size() ||
        !correct.is_array() || correct.size() != inputs.size()) {
      return Status::Internal(who + ": the worker answered no score list of "
                              "the batch's size");
    }
    std::vector<RewardScore> scores(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      scores[i].score = values[i].get<double>();
      if (correct[i].is_boolean()) scores[i].correct = correct[i].get<bool>();
    }
    return scores;
  }

  std::string_view name() const override { return "python"; }

 private:
  const std::string file_;
  const std::string function_;
  mutable std::mutex mu_;  // One request in flight.
  std::unique_ptr<ChildProcess> worker_;
};

}  // namespace

Result<std::unique_ptr<RewardFunction>> NewPythonReward(
    const std::string& file, const std::string& function) {
  if (file.empty()) {
    return Status::InvalidArgument(
        "reward python: data.reward_file is empty (a .py file with the "
        "function data.reward_function)");
  }
  const char* env = std::getenv("HY_REWARD_PYTHON");
  ChildOptions options;
  options.argv = {env != nullptr && *env ? env : HY_DEFAULT_REWARD_PYTHON,
                  "-m", "hy_reward.serve", file, function};
  options.pythonpath_first = HY_SOURCE_PYTHON_DIR;
  options.pipe_stdin = true;
  options.pipe_stdout = true;
  auto worker = ChildProcess::Start(options);
  if (!worker.ok()) {
    return Status::FailedPrecondition(
        "reward python: " + std::string(worker.status().message()) +
        " (HY_REWARD_PYTHON chooses the interpreter)");
  }
  auto ready = (*worker)->ReadLine();
  if (!ready.ok()) {
    return Status::FailedPrecondition(
        "reward python: the worker (" + options.argv[0] +
        " -m hy_reward.serve) exited " + std::to_string((*worker)->Wait()) +
        " before it was ready (HY_REWARD_PYTHON chooses the interpreter)");
  }
  const Json j = Json::parse(*ready, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error")) {
    return Status::InvalidArgument("reward python: data.reward_file " + file +
                                   ": " + j["error"].get<std::string>());
  }
  if (!j.is_object() || !j.value("ready", false)) {
    return Status::Internal("reward python: the worker did not say ready");
  }
  return std::unique_ptr<RewardFunction>(
      new PythonReward(file, function, std::move(*worker)));
}

}  // namespace hy::trainer
