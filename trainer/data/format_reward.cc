// format: the response states its final answer as "#### N" (reward.h).

#include "hy/trainer/data/answer.h"
#include "reward_impl.h"

namespace hy::trainer {
namespace {

class FormatReward final : public RewardFunction {
 public:
  double Score(const RewardInput& input) const override {
    return MarkedAnswer(input.response) ? 1.0 : 0.0;
  }

  RewardScore Parts(const RewardInput& input) const override {
    RewardScore r;
    r.score = Score(input);
    r.formatted = r.score >= 1.0;
    return r;
  }

  std::string_view name() const override { return "format"; }
};

}  // namespace

std::unique_ptr<RewardFunction> NewFormatReward() {
  return std::make_unique<FormatReward>();
}

}  // namespace hy::trainer
