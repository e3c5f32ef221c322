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
//   python               a function written in Python (data.reward_file,
//                        data.reward_function), in either of verl's forms,
//                        run by a worker process beside the trainer
//                        (python -m hy_reward.serve; python/hy_reward says
//                        what it is given). Its exception, or a score that
//                        is no finite number, is an error naming the
//                        sample, never a score of 0.
//
// A response or reference answer with no number scores 0.0 for
// exact_match; no input makes a rule reward fail. (The built-in digit task keeps
// its own Reward, task.h.)
//
// Ownership: MakeReward's caller owns the function (a python reward owns
// its worker process, ended with it). Thread-safety: Score and ScoreBatch
// are const and may be called concurrently (a python reward serializes
// its calls).

#ifndef HY_TRAINER_DATA_REWARD_H_
#define HY_TRAINER_DATA_REWARD_H_

#include <map>
#include <memory>
#include <optional>
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
  // The prompt's text as the model saw it (python rewards get it).
  std::string_view prompt;
  // The record's index in its dataset (python rewards get it), and where
  // it is ("FILE:LINE", for errors; may be empty).
  int64_t index = 0;
  std::string_view source;
};

// One response's reward and, where the reward has them, its parts: whether
// the answer is right (exact_match and strict: the score itself;
// exact_match+format: its exact_match part; python: "acc" of a dict the
// function returns, verl's key) and whether it is stated in the expected
// form (format; exact_match+format's format part). -o json reports the two
// rates apart from the reward.
struct RewardScore {
  double score = 0;
  std::optional<bool> correct;
  std::optional<bool> formatted;
};

class RewardFunction {
 public:
  virtual ~RewardFunction() = default;

  // The reward of `input`, in [0, 1] for the rule rewards above (a
  // weighted sum may exceed 1). A python reward returns NaN when its
  // function fails: callers that can report errors use ScoreBatch.
  virtual double Score(const RewardInput& input) const = 0;

  // Score and its parts (RewardScore). Default: no parts.
  virtual RewardScore Parts(const RewardInput& input) const {
    return RewardScore{Score(input), std::nullopt, std::nullopt};
  }

  // The rewards of `inputs`, in order. Rule rewards: Parts of each, never
  // an error. A python reward calls its function once for the batch;
  // returns InvalidArgument naming the sample (its source, else "sample I"
  // for its index in `inputs`) with the function's own message when it
  // raises or gives no finite number for a sample, Unavailable when the
  // worker is gone.
  virtual Result<std::vector<RewardScore>> ScoreBatch(
      const std::vector<RewardInput>& inputs) const;

  // The name MakeReward knows it by.
  virtual std::string_view name() const = 0;
};

struct RewardOptions {
  bool require_eos = false;         // exact_match, strict: no EOS scores 0.
  double exact_match_weight = 1.0;  // exact_match+format.
  double format_weight = 0.1;       // exact_match+format.
  std::string python_file;          // python: the file, and
  std::string python_function = "compute_score";  // the function in it.
};

// The names MakeReward accepts, sorted.
std::vector<std::string> KnownRewardNames();

// The reward called `name`. Returns InvalidArgument listing the known names
// for any other name, or when a weight of exact_match+format is negative or
// not finite; for python, InvalidArgument naming the file when it or the
// function cannot be loaded (the worker's own message), FailedPrecondition
// when the worker cannot start.
Result<std::unique_ptr<RewardFunction>> MakeReward(
    std::string_view name, const RewardOptions& options);

}  // namespace hy::trainer

#endif  // HY_TRAINER_DATA_REWARD_H_
