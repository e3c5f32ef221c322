// ChatTemplate: renders chat messages into the text a model is trained on or
// continues from, as transformers' apply_chat_template(..., tokenize=False)
// renders the model's Hugging Face chat template. There is no Jinja engine
// here: hy recognises the template families below from markers in
// tokenizer_config.json's "chat_template" and renders them in C++. The
// reference is transformers (PyPI) on the same tokenizer_config.json; the
// tests compare the two character for character.
//
//   ChatML (Qwen2, Qwen2.5, Qwen3; marker "<|im_start|>")
//     [<|im_start|>system\n{default system}<|im_end|>\n]   if the template
//         has a literal default system prompt and messages[0] is no system
//     <|im_start|>{role}\n{content}<|im_end|>\n              per message
//     <|im_start|>assistant\n                                 generation prompt
//   With Qwen3's thinking switch (marker "enable_thinking"), as Qwen3's
//   template does:
//     - assistant content loses everything up to its last "</think>" (and
//       the newlines after it);
//     - an assistant message after the last user message is written as
//       "<think>\n{reasoning}\n</think>\n\n{content}" when it is the last
//       message or has reasoning;
//     - enable_thinking=false appends "<think>\n\n</think>\n\n" to the
//       generation prompt (an empty thought: the model answers at once);
//       enable_thinking=true appends nothing (the model may think).
//
//   Llama 3 (marker "<|start_header_id|>"), the Llama 3.0 Instruct template:
//     {bos}<|start_header_id|>{role}<|end_header_id|>\n\n{trim(content)}
//         <|eot_id|>  per message ({bos} only before the first)
//     <|start_header_id|>assistant<|end_header_id|>\n\n  generation prompt
//   trim strips what Python's str.strip() does (Jinja's trim filter):
//   ASCII whitespace, U+001C-U+001F, U+0085, U+00A0 and the Unicode spaces.
//   Llama 3.1+ templates (marker "Cutting Knowledge Date") add a dated
//   system header; hy does not render them and says so.
//
// The generation prompt: a template that mentions add_generation_prompt
// writes it only when asked; one that does not (the Llama 3.0 template of
// tests/data/tokenizers/llama3) writes it always, whatever the caller
// asks, as transformers does with that template.
//
// The rendered text already holds the special tokens (and Llama's BOS): a
// tokenizer must encode it without adding special tokens of its own.
// Tool calls, tool definitions, reasoning_content and the "tool" role are
// not rendered: Render refuses a role other than system, user or
// assistant (ChatMessage has no fields for the others).
//
// Thread-safety: immutable after creation; Render may be called
// concurrently.

#ifndef HY_TRAINER_TOKENIZER_CHAT_TEMPLATE_H_
#define HY_TRAINER_TOKENIZER_CHAT_TEMPLATE_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hy/common/result.h"
#include "hy/trainer/tokenizer/prompt.h"

namespace hy::trainer {

enum class ChatFamily { kChatMl, kQwen3, kLlama3 };

// Returns "chatml", "qwen3" or "llama3".
std::string_view ChatFamilyName(ChatFamily family);

class ChatTemplate {
 public:
  // From the text of a tokenizer_config.json; `source` names it in
  // messages. Returns InvalidArgument when the text is not a JSON object,
  // has no string (or list with a "default" entry) "chat_template", or the
  // template is of no family above.
  static Result<ChatTemplate> FromTokenizerConfig(std::string_view json_text,
                                                  std::string_view source);

  // Reads `path` (a tokenizer_config.json). Returns NotFound when it does
  // not exist, IOError when it cannot be read, else as FromTokenizerConfig.
  static Result<ChatTemplate> FromTokenizerConfigFile(const std::string& path);

  // From the template text itself and the BOS token (used by Llama 3).
  // Returns InvalidArgument when the template is of no family above.
  static Result<ChatTemplate> FromTemplateText(std::string_view chat_template,
                                               std::string bos_token);

  ChatFamily family() const { return family_; }

  // The text for `messages`, ending with the generation prompt when
  // `add_generation_prompt` (or when the template writes it always, see
  // above). `enable_thinking` matters for kQwen3 only. Returns
  // InvalidArgument when `messages` is empty or holds a role that is not
  // system, user or assistant.
  Result<std::string> Render(const std::vector<ChatMessage>& messages,
                             bool enable_thinking,
                             bool add_generation_prompt = true) const;

  // False when the template writes the generation prompt whatever
  // add_generation_prompt says.
  bool generation_prompt_optional() const {
    return generation_prompt_optional_;
  }

 private:
  ChatTemplate(ChatFamily family, std::string default_system,
               std::string bos_token, bool generation_prompt_optional)
      : family_(family),
        default_system_(std::move(default_system)),
        bos_token_(std::move(bos_token)),
        generation_prompt_optional_(generation_prompt_optional) {}

  std::string RenderChatMl(const std::vector<ChatMessage>& messages,
                           bool generation_prompt) const;
  std::string RenderQwen3(const std::vector<ChatMessage>& messages,
                          bool enable_thinking, bool generation_prompt) const;
  std::string RenderLlama3(const std::vector<ChatMessage>& messages,
                           bool generation_prompt) const;

  ChatFamily family_;
  std::string default_system_;  // ChatML: empty when there is none.
  std::string bos_token_;       // Llama 3.
  bool generation_prompt_optional_;
};

// The text the model continues from: a string prompt as is, chat messages
// rendered by `chat_template`. Returns FailedPrecondition for a chat prompt
// when `chat_template` is null, else what Render returns.
Result<std::string> PromptText(const ChatPrompt& prompt,
                               const ChatTemplate* chat_template,
                               bool enable_thinking);

}  // namespace hy::trainer

#endif  // HY_TRAINER_TOKENIZER_CHAT_TEMPLATE_H_
