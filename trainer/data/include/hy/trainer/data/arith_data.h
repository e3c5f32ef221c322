// Arithmetic prompts with verifiable answers, written as a JSONL prompt
// dataset (prompt_data.h) for a small model to learn: short prompts, short
// answers, checked by the exact_match reward (reward.h), which reads the
// last number of the response.
//
//   {"prompt": "37+45=", "answer": "82"}
//   {"prompt": [{"role": "user", "content": "37+45="}], "answer": "82"}
//                                                       (chat = true)
//
// Each operand has a digit count drawn uniformly from [min_digits,
// max_digits] and no leading zero (a one-digit operand may be 0). The
// operation is drawn uniformly from `ops`; '-' may give a negative answer
// ("3-15=" -> "-12"). The model is to answer with the answer text and then
// EOS (ArithSftTarget).
//
// Determinism: problem i is a pure function of (seed, i, ops, digit range):
// a counter-based generator, so the file is the same on every machine.
//
// Thread-safety: pure functions (WriteArithJsonl writes only its file).

#ifndef HY_TRAINER_DATA_ARITH_DATA_H_
#define HY_TRAINER_DATA_ARITH_DATA_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "hy/common/result.h"
#include "hy/common/status.h"
#include "hy/trainer/data/prompt_data.h"

namespace hy::trainer {

// Operands stay below 10^9, so products fit in 64 bits.
inline constexpr int kMaxArithDigits = 9;

struct ArithConfig {
  std::string ops = "+-";  // Of '+', '-', '*'; a repeat weighs double.
  int min_digits = 1;
  int max_digits = 2;
  uint64_t count = 1000;  // Records WriteArithJsonl writes.
  uint64_t seed = 0;
  bool chat = false;  // Prompts as one user message instead of a string.
};

// Returns InvalidArgument when ops is empty or holds anything but '+', '-',
// '*', unless 1 <= min_digits <= max_digits <= kMaxArithDigits, or when
// count is 0.
Status ValidateArithConfig(const ArithConfig& config);

// "+,-,*" -> "+-*". Returns InvalidArgument naming the first item that is
// not one of the three operations (an empty item included).
Result<std::string> ParseArithOps(std::string_view text);

struct ArithProblem {
  std::string question;  // "37+45="
  std::string answer;    // "82"
};

// Problem `index` of the stream `config.seed` names.
// REQUIRES: ValidateArithConfig(config).ok().
ArithProblem MakeArithProblem(const ArithConfig& config, uint64_t index);

// One JSONL line (no trailing newline) for `problem`.
std::string ArithJsonLine(const ArithProblem& problem, bool chat);

// Writes problems 0 .. count-1 to `path`, one line each. Returns what
// ValidateArithConfig returns, or IOError when `path` cannot be written.
Status WriteArithJsonl(const ArithConfig& config, const std::string& path);

// The text an SFT warm-up trains the model to produce for an arithmetic
// record: its answer ("82"); the caller appends EOS.
std::string ArithSftTarget(const PromptRecord& record);

}  // namespace hy::trainer

#endif  // HY_TRAINER_DATA_ARITH_DATA_H_
