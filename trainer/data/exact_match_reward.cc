// exact_match: the response's final answer equals the record's (reward.h).

#include "hy/trainer/data/answer.h"
#include "reward_impl.h"

namespace hy::trainer {
namespace {

class ExactMatchReward final : public RewardFunction {
 public:
  explicit ExactMatchReward(bool require_eos) : require_eos_(require_eos) {}

  double Score(const RewardInput& input) const override {
    if (require_eos_ && !input.ended_with_eos) return 0.0;
    const std::optional<std::string> expected = FinalAnswer(input.answer);
    if (!expected) return 0.0;
    return FinalAnswer(input.response) == expected ? 1.0 : 0.0;
  }

  RewardScore Parts(const RewardInput& input) const override {
    RewardScore r;
    r.score = Score(input);
    r.correct = r.score >= 1.0;
    return r;
  }

  std::string_view name() const override { return "exact_match"; }

 private:
  const bool require_eos_;
};

}  // namespace

std::unique_ptr<RewardFunction> NewExactMatchReward(bool require_eos) {
  return std::make_unique<ExactMatchReward>(require_eos);
}

}  // namespace hy::trainer
