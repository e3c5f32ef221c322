// ChatPrompt: what the model is asked, either a plain string (used as is) or a
// list of chat messages (rendered by a ChatTemplate, chat_template.h).
// Strings only: nothing here depends on a tokenizer.
//
// Thread-safety: plain values.

#ifndef HY_TRAINER_TOKENIZER_PROMPT_H_
#define HY_TRAINER_TOKENIZER_PROMPT_H_

#include <string>
#include <string_view>
#include <vector>

namespace hy::trainer {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant".
  std::string content;

  friend bool operator==(const ChatMessage& a, const ChatMessage& b) {
    return a.role == b.role && a.content == b.content;
  }
};

// True for the roles hy accepts in prompts: "system", "user", "assistant".
inline bool IsKnownChatRole(std::string_view role) {
  return role == "system" || role == "user" || role == "assistant";
}

struct ChatPrompt {
  bool is_chat = false;
  std::string text;                   // The prompt when !is_chat.
  std::vector<ChatMessage> messages;  // The prompt when is_chat; non-empty.
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_TOKENIZER_PROMPT_H_
