#include "hy/trainer/data/reward.h"

#include <cmath>

#include "reward_impl.h"

namespace hy::trainer {
namespace {

bool ValidWeight(double w) { return std::isfinite(w) && w >= 0.0; }

}  // namespace

Result<std::vector<RewardScore>> RewardFunction::ScoreBatch(
    const std::vector<RewardInput>& inputs) const {
  std::vector<RewardScore> scores;
  scores.reserve(inputs.size());
  for (const RewardInput& in : inputs) scores.push_back(Parts(in));
  return scores;
}

std::vector<std::string> KnownRewardNames() {
  return {"exact_match", "exact_match+format", "format", "python", "strict"};
}

Result<std::unique_ptr<RewardFunction>> MakeReward(
    std::string_view name, const RewardOptions& options) {
  if (name == "exact_match") return NewExactMatchReward(options.require_eos);
  if (name == "format") return NewFormatReward();
  if (name == "strict") return NewStrictReward(options.require_eos);
  if (name == "python") {
    return NewPythonReward(options.python_file, options.python_function);
  }
  if (name == "exact_match+format") {
    if (!ValidWeight(options.exact_match_weight) ||
        !ValidWeight(options.format_weight)) {
      return Status::InvalidArgument(
          "reward exact_match+format: weights must be finite and >= 0");
    }
    return NewExactMatchFormatReward(
        options.require_eos, options.exact_match_weight, options.format_weight);
  }
  std::string known;
  for (const std::string& n : KnownRewardNames()) {
    known += (known.empty() ? "" : ", ") + n;
  }
  return Status::InvalidArgument("unknown reward \"" + std::string(name) +
                                 "\"; known rewards: " + known);
}

}  // namespace hy::trainer
