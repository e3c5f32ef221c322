// Evaluate: decodes a JSONL prompt file with a model, on one process, and
// scores every response with a rule reward; what `hyctl eval` runs to check
// a checkpoint or an exported model.
//
// The model is a trainer run's committed step (a store root: its actor or
// reference, the run's tokenizer and special ids as its checkpoint records
// them, hy/trainer/data/special_tokens.h) or a Hugging Face directory (its
// config.json, weights, tokenizer files and eos ids, including those of its
// generation_config.json). Prompts are rendered and tokenized as the
// trainer does (hy/trainer/data/prompt_source.h: MakeDatasetSource), decoded
// with the rollout's code (greedy at temperature 0, else sampled with the
// rollout's reproducible draws), and each response ends at the first eos
// id or after max_new_tokens.
//
// Thread-safety: a free function; it uses LibTorch's intra-op threads.

#ifndef HY_TRAINER_PPO_EVALUATE_H_
#define HY_TRAINER_PPO_EVALUATE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hy/common/result.h"

namespace hy::trainer {

struct EvalOptions {
  std::string source;  // A run's store root or a Hugging Face directory.
  int64_t step = -1;   // Store: the committed step (-1: newest).
  std::string model = "actor";  // Store: actor | reference.
  std::string data_file;        // JSONL prompts (prompt_data.h).
  // Where the run's tokenizer files are now if they moved (checked against
  // the run's record); an HF directory: another tokenizer directory.
  std::string tokenizer;
  std::string reward;       // Empty: the run's data.reward, else exact_match.
  std::string reward_file;      // reward python: empty: the run's.
  std::string reward_function;  // reward python: empty: the run's.
  int max_new_tokens = -1;  // -1: the run's rollout.response_length; HF: 64.
  double temperature = 0;   // 0: greedy.
  int top_k = 0;
  uint64_t seed = 0;
  // "float32" | "bfloat16"; empty: a run's rollout dtype (bfloat16, as its
  // validation decodes), an HF directory's own.
  std::string dtype;
  int batch_size = 64;
  bool enable_thinking = false;  // Qwen3 chat templates.
  int max_prompt_length = -1;    // -1: the run's, else 1024.
  // Also score each response by a forward over prompt + response (as the
  // trainer scores its rollouts): EvalSample::response_logprobs.
  bool logprobs = false;
};

struct EvalSample {
  int64_t index = 0;              // Line order in data_file.
  std::string prompt;             // As the model saw it (decoded ids).
  std::vector<int> prompt_ids;    // The ids the model saw.
  std::string response;           // Up to the eos, special tokens kept.
  std::vector<int> response_ids;  // Up to and including the eos.
  // With EvalOptions::logprobs: log softmax (temperature 1, the whole
  // vocabulary, f32) of each response_ids token given the tokens before it.
  std::vector<double> response_logprobs;
  bool ended_with_eos = false;
  double reward = 0;
  bool exact = false;
};

struct EvalReport {
  std::string model;  // What was decoded: "RUN step N actor" or the dir.
  int64_t prompts = 0;
  double reward_mean = 0;
  double exact_match = 0;  // Share of responses scoring as exact.
  double seconds = 0;
  // Of seconds, the time spent decoding (the forwards that generate).
  double generate_seconds = 0;
  int64_t new_tokens = 0;
  // Damaged copies passed over for another (CheckpointReader::fallbacks).
  std::vector<std::string> notes;
};

// Runs the evaluation, calling on_sample (may be empty) per prompt in
// order. Returns InvalidArgument for options that do not fit the model
// (dtype, a prompt longer than max_prompt_length or than the model's
// positions allow), the checkpoint's, tokenizer's, dataset's and reward's
// errors (naming the file).
Result<EvalReport> Evaluate(
    const EvalOptions& options,
    const std::function<void(const EvalSample&)>& on_sample);

}  // namespace hy::trainer

#endif  // HY_TRAINER_PPO_EVALUATE_H_
