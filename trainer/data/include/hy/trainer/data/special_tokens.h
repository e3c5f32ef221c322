// The special token ids a run trains with, chosen from a Hugging Face
// tokenizer directory (run_tokens.h records them with the run's
// checkpoints).
//
// Which ids (SpecialTokensFor, for a Hugging Face tokenizer):
//   bos  tokenizer_config.json's bos_token, or none;
//   eos  its eos_token, then the token that ends an assistant turn in the
//        model's chat template when that is another one (the special
//        token its rendering writes first after an assistant message's
//        content: Qwen's <|im_end|>, Llama 3's <|eot_id|>), then the
//        model's own eos_token_id(s) not already listed: any of them ends
//        a response;
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

// What the chat template of the directory of `tokenizer_path` writes after
// an assistant message's content (ChatTemplate's probe, rendered by
// transformers); nullopt when the directory has no chat template. Returns
// what ChatTemplate::Load and Render return on a template that cannot be
// read or rendered.
Result<std::optional<std::string>> TurnEndOf(const std::string& tokenizer_path);

// The run's ids for `tokenizer` (see above). `turn_end` is what the chat
// template writes after an assistant turn, if the tokenizer has a
// template. Returns InvalidArgument when there is no eos at all
// (responses could not end).
Result<TokenSpec> SpecialTokensFor(const Tokenizer& tokenizer,
                                   const std::optional<std::string>& turn_end,
                                   const std::vector<int>& model_eos);

}  // namespace hy::trainer

#endif  // HY_TRAINER_DATA_SPECIAL_TOKENS_H_
