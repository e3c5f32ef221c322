// exact_match+format: a weighted sum of the two (reward.h).

#include "reward_impl.h"

namespace hy::trainer {
namespace {

class ExactMatchFormatReward final : public RewardFunction {
 public:
  ExactMatchFormatReward(bool require_eos, double exact_match_weight,
                         double format_weight)
      : exact_match_(NewExactMatchReward(require_eos)),
        format_(NewFormatReward()),
        exact_match_weight_(exact_match_weight),
        format_weight_(format_weight) {}

  double Score(const RewardInput& input) const override {
    return exact_match_weight_ * exact_match_->Score(input) +
           format_weight_ * format_->Score(input);
  }

  RewardScore Parts(const RewardInput& input) const override {
    const double exact = exact_match_->Score(input);
    const double format = format_->Score(input);
    RewardScore r;
    r.score = exact_match_weight_ * exact + format_weight_ * format;
    r.correct = exact >= 1.0;
    r.formatted = format >= 1.0;
    return r;
  }

  std::string_view name() const override { return "exact_match+format"; }

 private:
  const std::unique_ptr<RewardFunction> exact_match_;
  const std::unique_ptr<RewardFunction> format_;
  const double exact_match_weight_;
  const double format_weight_;
};

}  // namespace

std::unique_ptr<RewardFunction> NewExactMatchFormatReward(
    bool require_eos, double exact_match_weight, double format_weight) {
  return std::make_unique<ExactMatchFormatReward>(
      require_eos, exact_match_weight, format_weight);
}

}  // namespace hy::trainer
