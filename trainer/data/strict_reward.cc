// strict: the response is the answer and nothing else (reward.h).

#include <optional>
#include <string>

#include "hy/trainer/data/answer.h"
#include "reward_impl.h"

namespace hy::trainer {
namespace {

std::string_view TrimAscii(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) + 1 - first);
}

class StrictReward final : public RewardFunction {
 public:
  explicit StrictReward(bool require_eos) : require_eos_(require_eos) {}

  double Score(const RewardInput& input) const override {
    if (require_eos_ && !input.ended_with_eos) return 0.0;
    const std::optional<std::string> number = CanonicalNumber(input.answer);
    if (number) {
      // A sentence's period after the number is still just the number.
      std::string_view response = TrimAscii(input.response);
      if (!response.empty() && response.back() == '.') {
        response.remove_suffix(1);
      }
      return CanonicalNumber(response) == number ? 1.0 : 0.0;
    }
    const std::string_view answer = TrimAscii(input.answer);
    return !answer.empty() && TrimAscii(input.response) == answer ? 1.0 : 0.0;
  }

  RewardScore Parts(const RewardInput& input) const override {
    RewardScore r;
    r.score = Score(input);
    r.correct = r.score >= 1.0;
    return r;
  }

  std::string_view name() const override { return "strict"; }

 private:
  const bool require_eos_;
};

}  // namespace

std::unique_ptr<RewardFunction> NewStrictReward(bool require_eos) {
  return std::make_unique<StrictReward>(require_eos);
}

}  // namespace hy::trainer
