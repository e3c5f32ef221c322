// The special token ids a run trains with, chosen from a Hugging Face
// tokenizer directory (run_tokens.h records them with the run's
// checkpoints).
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
// Thread-safety: free functions of their arguments.

#ifndef HY_TRAINER_DATA_SPECIAL_TOKENS_H_
#define HY_TRAINER_DATA_SPECIAL_TOKENS_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"
#include "hy/trainer/data/prompt_source.h"
#include "hy/trainer/tokenizer/chat_template.h"
#include "hy/trainer/tokenizer/tokenizer.h"

namespace hy::trainer {

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

}  // namespace hy::trainer

#endif  // HY_TRAINER_DATA_SPECIAL_TOKENS_H_
