#include "hy/trainer/tokenizer/chat_template.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <utility>

namespace hy::trainer {
namespace {

using nlohmann::json;

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool StartsWith(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

std::string_view StripLeft(std::string_view s, std::string_view chars) {
  const size_t i = s.find_first_not_of(chars);
  return i == std::string_view::npos ? std::string_view() : s.substr(i);
}

std::string_view StripRight(std::string_view s, std::string_view chars) {
  const size_t i = s.find_last_not_of(chars);
  return i == std::string_view::npos ? std::string_view() : s.substr(0, i + 1);
}

std::string_view Strip(std::string_view s, std::string_view chars) {
  return StripRight(StripLeft(s, chars), chars);
}

// The code points of Python's str.isspace() in UTF-8: what Jinja's trim
// filter (str.strip()) removes.
// clang-format off
constexpr std::string_view kPyWhitespace[] = {
    "\t", "\n", "\v", "\f", "\r", "\x1C", "\x1D", "\x1E", "\x1F", " ",
    "\xC2\x85", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81",
    "\xE2\x80\x82", "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85",
    "\xE2\x80\x86", "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89",
    "\xE2\x80\x8A", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF",
    "\xE2\x81\x9F", "\xE3\x80\x80"};
// clang-format on

// The length of the whitespace character s starts (ends) with, or 0.
size_t LeadingPyWhitespace(std::string_view s) {
  for (std::string_view w : kPyWhitespace) {
    if (StartsWith(s, w)) return w.size();
  }
  return 0;
}

size_t TrailingPyWhitespace(std::string_view s) {
  for (std::string_view w : kPyWhitespace) {
    if (EndsWith(s, w)) return w.size();
  }
  return 0;
}

// Python's s.strip() (Jinja's `trim`) on UTF-8.
std::string_view PyStrip(std::string_view s) {
  for (size_t n; (n = LeadingPyWhitespace(s)) != 0;) s.remove_prefix(n);
  for (size_t n; (n = TrailingPyWhitespace(s)) != 0;) s.remove_suffix(n);
  return s;
}

// The literal default system prompt of a ChatML template, as Qwen2 and
// Qwen2.5 write it: '<|im_start|>system\nTEXT<|im_end|>\n' inside a Jinja
// string (so "\n" is a backslash and an n). Empty when there is none.
std::string DefaultSystemPrompt(std::string_view tmpl) {
  constexpr std::string_view kOpen = "<|im_start|>system\\n";
  for (size_t at = tmpl.find(kOpen); at != std::string_view::npos;
       at = tmpl.find(kOpen, at + 1)) {
    std::string_view rest = tmpl.substr(at + kOpen.size());
    const size_t end = rest.find(kImEnd);
    if (end == std::string_view::npos || end == 0) continue;
    std::string_view text = rest.substr(0, end);
    if (text.find_first_of("'\"{}+") != std::string_view::npos) continue;
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      const bool newline =
          text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n';
      out += newline ? '\n' : text[i];
      i += newline ? 1 : 0;
    }
    return out;
  }
  return "";
}

void AppendChatMl(std::string_view role, std::string_view content,
                  std::string* out) {
  *out += kImStart;
  *out += role;
  *out += '\n';
  *out += content;
  *out += kImEnd;
  *out += '\n';
}

// Qwen3's index of the last user message that is not a tool response.
size_t LastQueryIndex(const std::vector<ChatMessage>& messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    const bool tool_response =
        StartsWith(c, "<tool_response>") && EndsWith(c, "</tool_response>");
    if (messages[i].role == "user" && !tool_response) return i;
  }
  return messages.size() - 1;
}

Result<std::string> ChatTemplateFrom(const json& config,
                                     std::string_view source) {
  auto t = config.find("chat_template");
  if (t != config.end() && t->is_string()) return t->get<std::string>();
  if (t != config.end() && t->is_array()) {
    for (const json& entry : *t) {
      if (entry.is_object() && entry.value("name", "") == "default" &&
          entry.contains("template") && entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
  }
  return Status::InvalidArgument(std::string(source) +
                                 ": no string \"chat_template\" (or list with "
                                 "a \"default\" template)");
}

std::string BosTokenFrom(const json& config) {
  auto b = config.find("bos_token");
  if (b == config.end()) return "";
  if (b->is_string()) return b->get<std::string>();
  if (b->is_object() && b->contains("content") && (*b)["content"].is_string()) {
    return (*b)["content"].get<std::string>();
  }
  return "";
}

}  // namespace

std::string_view ChatFamilyName(ChatFamily family) {
  switch (family) {
    case ChatFamily::kChatMl:
      return "chatml";
    case ChatFamily::kQwen3:
      return "qwen3";
    case ChatFamily::kLlama3:
      return "llama3";
  }
  return "unknown";
}

Result<ChatTemplate> ChatTemplate::FromTemplateText(
    std::string_view chat_template, std::string bos_token) {
  if (Contains(chat_template, "Cutting Knowledge Date")) {
    return Status::InvalidArgument(
        "chat_template is a Llama 3.1+ template (dated system header), which "
        "hy does not render (ChatML, Qwen3, Llama 3.0); pass prompts as "
        "strings");
  }
  // A template that never tests add_generation_prompt writes the prompt
  // unconditionally (Llama 3.0's first release does).
  const bool optional = Contains(chat_template, "add_generation_prompt");
  if (Contains(chat_template, "<|start_header_id|>")) {
    return ChatTemplate(ChatFamily::kLlama3, "", std::move(bos_token),
                        optional);
  }
  if (Contains(chat_template, kImStart)) {
    if (Contains(chat_template, "enable_thinking")) {
      return ChatTemplate(ChatFamily::kQwen3, "", "", optional);
    }
    return ChatTemplate(ChatFamily::kChatMl, DefaultSystemPrompt(chat_template),
                        "", optional);
  }
  return Status::InvalidArgument(
      "chat_template is not one hy renders (ChatML, Llama 3); pass prompts "
      "as strings");
}

Result<ChatTemplate> ChatTemplate::FromTokenizerConfig(
    std::string_view json_text, std::string_view source) {
  const json config = json::parse(json_text, nullptr, false);
  if (!config.is_object()) {
    return Status::InvalidArgument(std::string(source) + ": not a JSON object");
  }
  HY_ASSIGN_OR_RETURN(std::string text, ChatTemplateFrom(config, source));
  auto t = FromTemplateText(text, BosTokenFrom(config));
  if (!t.ok()) return t.status().WithContext(source);
  return t;
}

Result<ChatTemplate> ChatTemplate::FromTokenizerConfigFile(
    const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return Status::NotFound(path + ": no such file");
  }
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return Status::IOError(path + ": cannot read");
  return FromTokenizerConfig(text, path);
}

Result<std::string> ChatTemplate::Render(
    const std::vector<ChatMessage>& messages, bool enable_thinking,
    bool add_generation_prompt) const {
  if (messages.empty()) {
    return Status::InvalidArgument("chat prompt: no messages");
  }
  for (const ChatMessage& m : messages) {
    if (!IsKnownChatRole(m.role)) {
      return Status::InvalidArgument(
          "chat prompt: role \"" + m.role +
          "\" is not system, user or assistant (hy renders no tool messages "
          "or tool calls)");
    }
  }
  const bool prompt = add_generation_prompt || !generation_prompt_optional_;
  switch (family_) {
    case ChatFamily::kChatMl:
      return RenderChatMl(messages, prompt);
    case ChatFamily::kQwen3:
      return RenderQwen3(messages, enable_thinking, prompt);
    case ChatFamily::kLlama3:
      return RenderLlama3(messages, prompt);
  }
  return Status::Internal("chat template: unknown family");
}

std::string ChatTemplate::RenderChatMl(const std::vector<ChatMessage>& messages,
                                       bool generation_prompt) const {
  std::string out;
  if (!default_system_.empty() && messages[0].role != "system") {
    AppendChatMl("system", default_system_, &out);
  }
  for (const ChatMessage& m : messages) AppendChatMl(m.role, m.content, &out);
  if (generation_prompt) out += std::string(kImStart) + "assistant\n";
  return out;
}

std::string ChatTemplate::RenderQwen3(const std::vector<ChatMessage>& messages,
                                      bool enable_thinking,
                                      bool generation_prompt) const {
  const size_t last_query = LastQueryIndex(messages);
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role != "assistant") {
      AppendChatMl(m.role, m.content, &out);
      continue;
    }
    std::string_view content = m.content;
    std::string_view reasoning;
    if (const size_t close = content.rfind("</think>");
        close != std::string_view::npos) {
      std::string_view before = content.substr(0, content.find("</think>"));
      before = StripRight(before, "\n");
      const size_t open = before.rfind("<think>");
      reasoning = StripLeft(
          open == std::string_view::npos ? before : before.substr(open + 7),
          "\n");
      content = StripLeft(content.substr(close + 8), "\n");
    }
    const bool with_thought =
        i > last_query && (i + 1 == messages.size() || !reasoning.empty());
    std::string body(content);
    if (with_thought) {
      body = "<think>\n" + std::string(Strip(reasoning, "\n")) +
             "\n</think>\n\n" + std::string(StripLeft(content, "\n"));
    }
    AppendChatMl("assistant", body, &out);
  }
  if (generation_prompt) {
    out += std::string(kImStart) + "assistant\n";
    if (!enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string ChatTemplate::RenderLlama3(const std::vector<ChatMessage>& messages,
                                       bool generation_prompt) const {
  std::string out = bos_token_;
  for (const ChatMessage& m : messages) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    out += PyStrip(m.content);
    out += "<|eot_id|>";
  }
  if (generation_prompt) {
    out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  return out;
}

Result<std::string> PromptText(const ChatPrompt& prompt,
                               const ChatTemplate* chat_template,
                               bool enable_thinking) {
  if (!prompt.is_chat) return prompt.text;
  if (chat_template == nullptr) {
    return Status::FailedPrecondition(
        "a chat prompt needs the model's chat template (tokenizer_config.json "
        "with a ChatML or Llama 3 chat_template)");
  }
  return chat_template->Render(prompt.messages, enable_thinking);
}

}  // namespace hy::trainer
