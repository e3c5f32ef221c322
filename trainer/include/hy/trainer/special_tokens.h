// The special token ids a run trains with, and the tokenizer they come
// from, as one record that travels with the run's checkpoints so that an
// export (hyctl export-hf) or an evaluation (hyctl eval) stops generation
// where training did.
//
// Which ids (SpecialTokensFor, for a Hugging Face tokenizer):
//   bos  tokenizer_config.json's bos_token, or none;
//   eos  its eos_token, then the token that ends a chat turn when the
//        tokenizer's chat template ends turns with another one (Qwen:
//        <|im_end|>, Llama 3: <|eot_id|>), then the model's own
//        eos_token_id(s) not already listed: any of them ends a response;
//   pad  its pad_token, else the first eos.
// This is what Qwen's and Llama's generation_config.json files spell as
// an eos list.
//
// RunTokens names the tokenizer directory by absolute path and records a
// content hash (xxh3-128) of each tokenizer file there, so a later export
// copies exactly the files the run tokenized with, or refuses.
//
// Thread-safety: free functions of their arguments.

#ifndef HY_TRAINER_SPECIAL_TOKENS_H_
#define HY_TRAINER_SPECIAL_TOKENS_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"
#include "hy/trainer/chat_template.h"
#include "hy/trainer/checkpoint.h"
#include "hy/trainer/config.h"
#include "hy/trainer/prompt_source.h"
#include "hy/trainer/tokenizer.h"

namespace hy::trainer {

// The checkpoint blob holding RunTokensJson.
inline constexpr std::string_view kTokensBlob = "trainer.tokens";

// The files of a Hugging Face tokenizer directory that travel with a model
// (those present are hashed and exported).
const std::vector<std::string>& TokenizerFileNames();

// The directory of a tokenizer path: the path itself, or the directory of
// a tokenizer.json file.
std::string TokenizerDir(const std::string& tokenizer_path);

// The family of the chat template in the tokenizer_config.json beside
// `tokenizer_path`; nullopt when there is none or hy does not render it.
std::optional<ChatFamily> ChatFamilyOf(const std::string& tokenizer_path);

// The token ending an assistant turn in `family`'s format ("<|im_end|>",
// "<|eot_id|>").
std::string_view TurnEndToken(ChatFamily family);

// The run's ids for `tokenizer` (see above). `chat` is the family of the
// tokenizer's chat template, if it has one hy renders. Returns
// InvalidArgument when there is no eos at all (responses could not end)
// or the turn-end token is not in the tokenizer.
Result<TokenSpec> SpecialTokensFor(const Tokenizer& tokenizer,
                                   std::optional<ChatFamily> chat,
                                   const std::vector<int>& model_eos);

struct RunTokens {
  TokenSpec spec;
  // Absolute; empty for the built-in task (its own 18 symbols).
  std::string tokenizer_dir;
  std::map<std::string, std::string> file_hashes;  // Name -> xxh3-128 hex.
};

// Hashes the tokenizer files of `tokenizer_path` (a directory, or a
// tokenizer.json whose directory is taken). Returns IOError for a file
// that cannot be read, NotFound when there is no tokenizer.json.
Result<RunTokens> DescribeRun(const TokenSpec& spec,
                              const std::string& tokenizer_path);

std::string RunTokensJson(const RunTokens& tokens);

// Returns DataLoss for text that is not such a record.
Result<RunTokens> ParseRunTokens(std::string_view json_text);

// The record of the run `reader` reads (`config` is its trainer.config):
// the checkpoint's kTokensBlob, or, for a checkpoint written before hy
// recorded it, what the trainer would have chosen: the tokenizer at
// data.tokenizer (or model.path) with the model's eos ids, or the built-in
// task's ids for a run without a dataset. Returns the blob's and the
// tokenizer's errors.
Result<RunTokens> RunTokensOf(CheckpointReader* reader,
                              const TrainConfig& config);

// Checks that `dir` holds the run's tokenizer files with the recorded
// hashes. Returns NotFound naming a missing file, FailedPrecondition
// naming a file whose content changed since the run.
Status CheckTokenizerFiles(const RunTokens& tokens, const std::string& dir);

}  // namespace hy::trainer

#endif  // HY_TRAINER_SPECIAL_TOKENS_H_
