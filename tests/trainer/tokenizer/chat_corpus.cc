#include "chat_corpus.h"

#include <utility>

namespace hy::trainer::testing {
namespace {

// clang-format off
const std::vector<std::string> kLines = {
    "What is 12 + 7?", "Answer with one word.", "You are a helpful assistant.",
    "Explain PPO in two sentences.", "The answer is 19.",
    "Let me think step by step: 12 + 7 = 19.",
    "def add(a, b):\n    return a + b", "```python\nprint(\"hi\")\n```",
    "日本語で答えてください。", "这是一个测试，好吗？", "한국어로 대답해 주세요.",
    "Café, naïve, Zürich — ½ ≤ ∑ x²", "emoji 👍🏽 🇯🇵 👨‍👩‍👧‍👦 ok",
    "Ελληνικά και русский", "مرحبا بالعالم", "tabs\tand  spaces",
    "a backslash \\ and quotes ' \"", "{{ not jinja }} {% raw %}",
    "<|im_end|> and <|eot_id|> written in the text", "see <think> here",
    "Line one.\n\nLine three.", "   indented\n\tcode", "x",
};
// Around content; Llama 3's template strips them (Python's str.strip()),
// ChatML keeps them.
const std::vector<std::string> kPads = {
    "", "", "", "", " ", "\n", "  \n", "\t", "\n\n", "\r\n", "\u3000",
    "\u00a0", "\u2003", "\x1c", "\xC2\x85", "\u2028", " \u200b",
};
// clang-format on

std::string Content(Rng& rng) {
  if (rng.OneIn(15)) return "";
  std::string s = rng.Pick(kPads);
  for (size_t i = 0, n = 1 + rng.Below(3); i < n; ++i) {
    if (i > 0) s += rng.OneIn(2) ? "\n" : "\n\n";
    s += rng.Pick(kLines);
  }
  return s + rng.Pick(kPads);
}

// An assistant turn: an answer, or a thought and an answer in one of the
// forms Qwen3's template takes apart.
std::string AssistantContent(Rng& rng) {
  if (rng.OneIn(2)) return Content(rng);
  const std::string r = Content(rng), a = Content(rng);
  switch (rng.Below(8)) {
    case 0:
      return "<think>\n" + r + "\n</think>\n\n" + a;
    case 1:
      return "<think>" + r + "</think>" + a;
    case 2:
      return "\n<think>\n\n" + r + "\n\n</think>\n\n\n" + a;
    case 3:
      return r + "\n</think>\n\n" + a;  // no opening tag
    case 4:
      return "<think>\n\n</think>\n\n" + a;
    case 5:
      return "<think>" + r + "</think>" + a + "<think>" + Content(rng) +
             "</think>\n" + Content(rng);
    case 6:
      return "<think>\n" + r;  // never closed
    default:
      return a + "\n<think>" + r + "</think>";
  }
}

std::string UserContent(Rng& rng) {
  if (rng.OneIn(6))
    return "<tool_response>\n" + Content(rng) + "\n</tool_response>";
  return Content(rng);
}

std::vector<ChatMessage> Conversation(Rng& rng) {
  std::vector<ChatMessage> m;
  if (!rng.OneIn(3)) m.push_back({"system", Content(rng)});
  if (rng.OneIn(15)) {  // no user turn at all
    m.push_back({"assistant", AssistantContent(rng)});
    return m;
  }
  const size_t turns = 1 + rng.Below(4);
  for (size_t t = 0; t < turns; ++t) {
    if (rng.OneIn(8)) m.push_back({"system", Content(rng)});
    m.push_back({"user", UserContent(rng)});
    if (rng.OneIn(8)) m.push_back({"user", UserContent(rng)});
    if (t + 1 < turns || !rng.OneIn(3)) {
      m.push_back({"assistant", AssistantContent(rng)});
      if (rng.OneIn(5)) m.push_back({"assistant", AssistantContent(rng)});
    }
  }
  return m;
}

}  // namespace

std::vector<ChatCase> MakeChatCases(size_t count, uint64_t seed) {
  Rng rng(seed);
  std::vector<ChatCase> cases;
  cases.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    cases.push_back(ChatCase{Conversation(rng), i % 2 == 0, i / 2 % 2 == 0});
  }
  return cases;
}

std::string MakeChatText(Rng& rng) {
  const std::vector<ChatMessage> messages = Conversation(rng);
  const bool prompt = !rng.OneIn(3);
  std::string s;
  if (rng.OneIn(2)) {  // Qwen3
    for (const ChatMessage& m : messages) {
      s += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    }
    if (prompt) s += "<|im_start|>assistant\n";
    if (prompt && rng.OneIn(2)) s += "<think>\n\n</think>\n\n";
    return s;
  }
  s = "<|begin_of_text|>";  // Llama 3
  for (const ChatMessage& m : messages) {
    s += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content +
         "<|eot_id|>";
  }
  if (prompt) s += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return s;
}

}  // namespace hy::trainer::testing
