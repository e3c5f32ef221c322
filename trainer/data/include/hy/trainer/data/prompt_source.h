// PromptSource: where the RL loop's prompts come from, how a response is
// scored, and what an SFT warm-up imitates. The loop (ppo_*.cc) sees only
// token ids through this interface; a task, a JSONL dataset with a
// tokenizer and a reward, or anything else is one implementation.
//
// Positions. Prompts form one stream, indexed by a global position that
// does not depend on the world size or rank: iteration i of a run with
// rollout.batch_size B uses positions [p_i, p_i + B), where p_i is the
// number of prompts consumed before it (the checkpoint records it), so a
// resumed run continues with the next unseen prompt. SFT demonstrations are
// a second stream indexed the same way.
//
// Thread-safety: implementations are immutable after construction; every
// method may be called concurrently.

#ifndef HY_TRAINER_DATA_PROMPT_SOURCE_H_
#define HY_TRAINER_DATA_PROMPT_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/trainer/data/reward.h"
#include "hy/trainer/config/config.h"
#include "hy/trainer/data/task.h"

namespace hy::trainer {

// The ids the loop treats specially.
struct TokenSpec {
  int bos = kBos;  // Begins a sequence (-1: the tokenizer has none).
  int pad = kPad;  // Fills left padding and ended responses.
  std::vector<int> eos{kEos};  // Any of them ends a response.
  bool IsEos(int64_t id) const;
};

struct Prompt {
  uint64_t position = 0;
  std::vector<int> tokens;  // What the policy is given.
};

struct Demonstration {
  std::vector<int> prompt;    // Token ids.
  std::vector<int> response;  // What the model should answer, ending in EOS.
};

class PromptSource {
 public:
  virtual ~PromptSource() = default;

  virtual const TokenSpec& token_spec() const = 0;

  // The prompt at stream position `position`. Returns an error (naming the
  // record) for a prompt that cannot be built.
  virtual Result<Prompt> Get(uint64_t position) const = 0;

  // The rewards of responses[i] (as sampled: each may hold EOS and tokens
  // after it) to prompts[i], in [0, 1] for the rule rewards, with their
  // parts where the reward has them (reward.h). A response
  // that cannot be parsed scores 0; a reward function that fails (a python
  // reward's exception) is an error naming the record, never a score.
  // REQUIRES: prompts.size() == responses.size().
  virtual Result<std::vector<RewardScore>> ScoreAll(
      const std::vector<Prompt>& prompts,
      const std::vector<std::vector<int>>& responses) const = 0;

  // Whether a score counts as an exact answer (the exact-match rate).
  virtual bool IsExact(double score) const { return score >= 1.0; }

  // Demonstration `index` of the SFT stream.
  virtual Result<Demonstration> Demonstrate(uint64_t index) const = 0;

  // Text for logs (token ids rendered as the source's text).
  virtual std::string Render(const std::vector<int>& ids) const = 0;

  // The most tokens a prompt may have (sizes sequence buffers).
  virtual int max_prompt_tokens() const = 0;

  // Distinct prompts in one pass of the stream (an epoch); 0: unbounded.
  virtual uint64_t num_prompts() const { return 0; }

  // The tokenizer.json file or directory the prompts were tokenized with;
  // empty for a source with its own symbols (the built-in task).
  virtual std::string tokenizer_path() const { return ""; }
};

// The built-in digit tasks of task.h over their 18-symbol vocabulary.
// Position p is Generate(task, seed, p / batch_size, p % batch_size) and
// SFT demonstration k is Generate(task, seed, kSftIterationBase +
// k / sft_batch_size, k % sft_batch_size): the streams of earlier hy
// versions.
std::unique_ptr<PromptSource> MakeTaskSource(const TaskConfig& task,
                                             uint64_t seed, int batch_size,
                                             int sft_batch_size);

// Prompts from data.train_files (prompt_data.h) in the seeded order of
// data_cursor.h, tokenized by the tokenizer at data.tokenizer (or
// model_dir), chat prompts rendered by the template in its
// tokenizer_config.json, scored by data.reward on the decoded response.
// Special ids: SpecialTokensFor (special_tokens.h) with `model_eos`
// (config.json's eos_token_id). SFT
// demonstrations are the records' answers, in a second seeded order.
// Every prompt is tokenized here, so a bad record fails before training.
// Returns the dataset's, tokenizer's, template's and reward's errors
// (naming the file and line), InvalidArgument for a prompt longer than
// data.max_prompt_length or a tokenizer with more ids than
// model_vocab_size.
Result<std::unique_ptr<PromptSource>> MakeDatasetSource(
    const DataConfig& data, const std::string& model_dir,
    const std::vector<int>& model_eos, uint64_t seed, int model_vocab_size);

// The iteration offset of the task's SFT stream (far from any PPO
// iteration).
inline constexpr uint64_t kSftIterationBase = 1ull << 40;

}  // namespace hy::trainer

#endif  // HY_TRAINER_DATA_PROMPT_SOURCE_H_
