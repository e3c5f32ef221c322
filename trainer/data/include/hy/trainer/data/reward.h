// RewardFunction: a rule-based reward for a response to a dataset prompt
// (prompt_data.h), chosen in the config by name through MakeReward. It sees
// text only (the response decoded up to EOS), never tokens.
//
//   exact_match          1.0 when FinalAnswer(response) equals
//                        FinalAnswer(answer) (answer.h: the number in the
//                        last \boxed{} if any, else "#### N" if present,
//                        else the last number; compared in canonical form),
//                        else 0.0. With require_eos, a response that did not
//                        end with EOS (cut at the length limit) scores 0.0.
//   strict               1.0 when the whole response (ASCII whitespace
//                        around it aside) is the answer and nothing else:
//                        the same number in canonical form when the answer
//                        is one number, a final period allowed ("1,234"
//                        and "1234." match "1234"),
//                        else the same text; with require_eos it must also
//                        have ended with EOS. "The answer is 8" scores 0.0
//                        here and 1.0 for exact_match.
//   format               1.0 when the response has a "#### N" final answer
//                        (MarkedAnswer), else 0.0.
//   exact_match+format   exact_match_weight * exact_match
//                        + format_weight * format.
//
// A response or reference answer with no number scores 0.0 for
// exact_match; no input makes a reward fail. (The built-in digit task keeps
// its own Reward, task.h.)
//
// Ownership: MakeReward's caller owns the function. Thread-safety: Score is
// const and keeps no state; it may be called concurrently.

#ifndef HY_TRAINER_DATA_REWARD_H_
#define HY_TRAINER_DATA_REWARD_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"

namespace hy::trainer {

struct RewardInput {
  // The response text, decoded up to (not including) EOS.
  std::string_view response;
  bool ended_with_eos = false;
  // The record's "answer" (PromptRecord::answer).
  std::string_view answer;
  // The record's fields (PromptRecord::fields); may be null.
  const std::map<std::string, std::string>* fields = nullptr;
};

class RewardFunction {
 public:
  virtual ~RewardFunction() = default;

  // The reward of `input`, in [0, 1] for the rewards above (a weighted sum
  // may exceed 1).
  virtual double Score(const RewardInput& input) const = 0;

  // The name MakeReward knows it by.
  virtual std::string_view name() const = 0;
};

struct RewardOptions {
  bool require_eos = false;         // exact_match, strict: no EOS scores 0.
  double exact_match_weight = 1.0;  // exact_match+format.
  double format_weight = 0.1;       // exact_match+format.
};

// The names MakeReward accepts, sorted.
std::vector<std::string> KnownRewardNames();

// The reward called `name`. Returns InvalidArgument listing the known names
// for any other name, or when a weight of exact_match+format is negative or
// not finite.
Result<std::unique_ptr<RewardFunction>> MakeReward(
    std::string_view name, const RewardOptions& options);

}  // namespace hy::trainer

#endif  // HY_TRAINER_DATA_REWARD_H_
