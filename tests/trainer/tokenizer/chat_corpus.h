// Seeded chat conversations: the cases hy's ChatTemplate is compared with
// transformers' apply_chat_template on (chat_template_hf_test.cc), and whole
// rendered conversations for the tokenizer corpus (tokenizer_corpus.cc).
// Conversations mix system / user / assistant turns (a system message first
// or not, sometimes one later), assistant turns with and without <think>
// blocks (closed, unclosed, empty, several, only a "</think>"), user turns
// that look like tool responses, multi-line and unicode content, and content
// padded with ASCII and Unicode whitespace.

#ifndef HY_TESTS_TRAINER_CHAT_CORPUS_H_
#define HY_TESTS_TRAINER_CHAT_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hy/trainer/tokenizer/prompt.h"
#include "test_rng.h"

namespace hy::trainer::testing {

struct ChatCase {
  std::vector<ChatMessage> messages;
  bool enable_thinking = true;
  bool add_generation_prompt = true;
};

// `count` conversations, the same for the same (count, seed) everywhere.
// Case i has enable_thinking = (i % 2 == 0) and add_generation_prompt =
// (i / 2 % 2 == 0): every combination comes up.
std::vector<ChatCase> MakeChatCases(size_t count, uint64_t seed);

// One conversation written out as Qwen3's template (ChatML, <think> blocks)
// or Llama 3's renders it, special tokens included, sometimes with the
// generation prompt: text for the tokenizer comparison.
std::string MakeChatText(Rng& rng);

}  // namespace hy::trainer::testing

#endif  // HY_TESTS_TRAINER_CHAT_CORPUS_H_
