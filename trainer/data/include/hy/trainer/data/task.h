// Task: the verifiable-reward task the PPO trainer (issue 6) learns on,
// generated on the fly (no downloads, no files).
//
// Vocabulary (kVocabSize = 18 ids; the character is what Detokenize prints
// and Tokenize reads):
//
//   id  0..9  the digits '0'..'9'
//   id  10    PAD   '_'   padding, never part of a sample
//   id  11    BOS   '^'   first token of every prompt
//   id  12    EOS   '$'   ends an answer
//   id  13    SEP   '='   ends a prompt; the answer follows
//   id  14    REV   'R'   task marker: reverse the digit string
//   id  15    SORT  'S'   task marker: sort the digits ascending
//   id  16    ADD   'A'   task marker: add two numbers
//   id  17    PLUS  '+'   separates the two operands of ADD
//
// Prompts:   REV:  BOS REV d1..dn SEP           answer dn..d1
//            SORT: BOS SORT d1..dn SEP          answer the digits sorted
//            ADD:  BOS ADD a1..an PLUS b1..bm SEP   answer a+b in decimal
// with n, m drawn uniformly from [min_digits, max_digits]. REV and SORT
// strings may have leading zeros; ADD operands and sums have none (except
// the number 0 itself). The SFT demonstration is prompt, answer, EOS.
//
// Determinism. Generate is a pure function of (config, seed, iteration,
// sample_index): sample_index is the GLOBAL index of the sample within the
// iteration's batch, so any partition of [0, batch) over any number of ranks
// yields the same samples. The generator is counter based (splitmix64 mixing
// of the triple, then of a draw counter), with no state carried between
// calls, so a run resumed on a different world size sees the same stream.
//
// Thread-safety: all functions are pure and may be called concurrently.

#ifndef HY_TRAINER_DATA_TASK_H_
#define HY_TRAINER_DATA_TASK_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"
#include "hy/trainer/config/task_config.h"

namespace hy::trainer {

inline constexpr int kPad = 10;
inline constexpr int kBos = 11;
inline constexpr int kEos = 12;
inline constexpr int kSep = 13;
inline constexpr int kRev = 14;
inline constexpr int kSort = 15;
inline constexpr int kAdd = 16;
inline constexpr int kPlus = 17;
static_assert(kPlus + 1 == kVocabSize, "task_config.h's kVocabSize");

struct Sample {
  TaskKind kind = TaskKind::kReverse;
  std::vector<int> prompt;  // BOS, marker, ..., SEP.
  std::vector<int> answer;  // Digits only; no EOS.
};

// The sample with global index `sample_index` of iteration `iteration`.
// REQUIRES: ValidateTaskConfig(config).ok().
Sample Generate(const TaskConfig& config, uint64_t seed, uint64_t iteration,
                uint64_t sample_index);

// A 64-bit seed for the sampler drawing token `token_position` (0-based
// within the response) of sample `sample_index`: a pure function of the four
// values, distinct (with overwhelming probability) from every other
// position's and from the seeds Generate uses internally.
uint64_t SamplingSeed(uint64_t seed, uint64_t iteration, uint64_t sample_index,
                      uint64_t token_position);

// The reward of a generated response (the tokens after the prompt, as
// sampled; it may contain EOS and tokens after it). Let a be the answer
// (n = |a| >= 1 digits), r the response up to but excluding its first EOS,
// and eos whether it has one. Then
//
//   Reward = 1.0                                  if eos and r == a
//          = 0.5 * matches / max(n, |r|)          otherwise
//
// where matches = #{ i < min(n, |r|) : r[i] == a[i] }. So a non-exact
// response earns at most 0.5 (a correct answer without EOS earns exactly
// 0.5), extra tokens lower the score, an empty response earns 0. Always in
// [0, 1]. Tokens after the first EOS are ignored.
double Reward(const Sample& sample, const std::vector<int>& response);

// prompt + answer + EOS: the sequence an SFT warm-up trains on.
std::vector<int> SftSequence(const Sample& sample);

// One character per token (see the table above); ids outside the vocabulary
// print as '?'.
std::string Detokenize(const std::vector<int>& tokens);

// The inverse of Detokenize. Returns InvalidArgument naming the offset of
// the first character that is not in the vocabulary.
Result<std::vector<int>> Tokenize(std::string_view text);

}  // namespace hy::trainer

#endif  // HY_TRAINER_DATA_TASK_H_
