// RunTokens: the special token ids a run trained with (special_tokens.h)
// and the tokenizer they come from, as one record that travels with the
// run's checkpoints, so that an export (hyctl export-hf) or an evaluation
// (hyctl eval) stops generation where training did.
//
// RunTokens names the tokenizer directory by absolute path and records a
// content hash (xxh3-128) of each tokenizer file there, so a later export
// copies exactly the files the run tokenized with, or refuses.
//
// Thread-safety: free functions of their arguments; RunTokensOf reads
// through `reader` (CheckpointReader's methods may run concurrently).

#ifndef HY_TRAINER_HF_RUN_TOKENS_H_
#define HY_TRAINER_HF_RUN_TOKENS_H_

#include <map>
#include <string>
#include <string_view>

#include "hy/checkpoint/checkpoint.h"
#include "hy/common/result.h"
#include "hy/common/status.h"
#include "hy/trainer/config/config.h"
#include "hy/trainer/data/prompt_source.h"

namespace hy::trainer {

// The checkpoint blob holding RunTokensJson.
inline constexpr std::string_view kTokensBlob = "trainer.tokens";

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
Result<RunTokens> RunTokensOf(checkpoint::CheckpointReader* reader,
                              const TrainConfig& config);

// Checks that `dir` holds the run's tokenizer files with the recorded
// hashes. Returns NotFound naming a missing file, FailedPrecondition
// naming a file whose content changed since the run.
Status CheckTokenizerFiles(const RunTokens& tokens, const std::string& dir);

}  // namespace hy::trainer

#endif  // HY_TRAINER_HF_RUN_TOKENS_H_
