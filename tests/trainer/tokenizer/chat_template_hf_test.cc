// hy's ChatTemplate against transformers' apply_chat_template(...,
// tokenize=False) (tokenize_reference.py chat) on the real Qwen3 and Llama 3
// tokenizer_config.json files of tests/data/tokenizers, character for
// character: seeded generated conversations (chat_corpus.h) and written-out
// edge cases, each with its enable_thinking and add_generation_prompt. The
// files, the interpreter and transformers are required: without them the
// test fails.

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat_corpus.h"
#include "hy/trainer/tokenizer/chat_template.h"
#include "testing/temp_dir.h"
#include "tokenizer_reference.h"

namespace hy::trainer {
namespace {

using Json = nlohmann::json;
using testing::ChatCase;

constexpr size_t kGeneratedCases = 60;

const std::vector<ChatMessage> kSystemUser = {{"system", "You are terse."},
                                              {"user", "12+7="}};

// Written out: what the generator may not hit every time.
std::vector<ChatCase> EdgeCases() {
  return {
      {kSystemUser, true, true},
      {kSystemUser, false, true},
      {kSystemUser, false, false},
      {{{"user", "  padded \n"}, {"assistant", "\tx "}, {"user", "y"}}, false},
      {{{"user", "1+1="},
        {"assistant", "<think>\nadd\n</think>\n\n2"},
        {"user", "2+2="}},
       true},
      {{{"user", "hi"}, {"assistant", "<think>\n\nhmm\n\n</think>\n\nhello"}},
       true},
      // A finished conversation, as a trainer renders one for SFT.
      {{{"user", "hi"}, {"assistant", "<think>\nhmm\n</think>\n\nhello"}},
       true,
       false},
      {{{"user", "a"}, {"system", "b"}, {"user", "c"}}, false},
      {{{"user", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac"}, {"assistant", "ok"}},
       true},
      // Unicode whitespace around content (Llama 3 trims it), and a
      // zero-width space that is no whitespace.
      {{{"system", "\u3000\xC2\xA0sys\xC2\x85\x1C"},
        {"user", "\u200Bq\u2003\n"}},
       true},
      // Tool responses written as user turns do not count as the query.
      {{{"user", "q"},
        {"assistant", "<think>t1</think>a1"},
        {"user", "<tool_response>\n42\n</tool_response>"},
        {"assistant", "<think>t2</think>a2"}},
       true,
       false},
      // No user turn at all.
      {{{"system", "s"}, {"assistant", "<think>x</think>y"}}, false, false},
  };
}

// What transformers renders for each case with the tokenizer of `model`.
std::vector<std::string> RenderWithTransformers(
    const std::string& model, const std::vector<ChatCase>& cases) {
  TempDir dir;
  std::vector<Json> in;
  for (const ChatCase& c : cases) {
    Json messages = Json::array();
    for (const ChatMessage& m : c.messages) {
      messages.push_back({{"role", m.role}, {"content", m.content}});
    }
    in.push_back({{"messages", messages},
                  {"enable_thinking", c.enable_thinking},
                  {"add_generation_prompt", c.add_generation_prompt}});
  }
  const std::string in_path = dir.path() + "/in.jsonl";
  const std::string out_path = dir.path() + "/out.jsonl";
  std::vector<std::string> rendered;
  std::vector<Json> out;
  if (!testing::WriteJsonValues(in, in_path) ||
      !testing::RunReference(
          {"chat", testing::TokenizerDir(model), in_path, out_path}) ||
      !testing::ReadJsonLines(out_path, &out)) {
    ADD_FAILURE() << "the reference did not run for " << model;
    return rendered;
  }
  for (const Json& j : out) rendered.push_back(j.get<std::string>());
  return rendered;
}

TEST(ChatTemplateTest, SharedFilesMatchTransformers) {
  ASSERT_TRUE(testing::ReferenceFilesExist());
  std::vector<ChatCase> cases = EdgeCases();
  const size_t edge = cases.size();
  for (ChatCase& c : testing::MakeChatCases(kGeneratedCases, 20250101)) {
    cases.push_back(std::move(c));
  }
  for (const char* model : {"qwen3", "llama3"}) {
    auto t = ChatTemplate::FromTokenizerConfigFile(
        testing::TokenizerDir(model) + "/tokenizer_config.json");
    ASSERT_TRUE(t.ok()) << t.status();
    const std::vector<std::string> want = RenderWithTransformers(model, cases);
    ASSERT_EQ(want.size(), cases.size()) << model;
    size_t mismatches = 0, without_prompt = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      const ChatCase& c = cases[i];
      without_prompt += c.add_generation_prompt ? 0 : 1;
      auto got =
          t->Render(c.messages, c.enable_thinking, c.add_generation_prompt);
      ASSERT_TRUE(got.ok()) << got.status();
      if (*got != want[i] && ++mismatches <= 5) {
        ADD_FAILURE() << model << " case " << i
                      << (i < edge ? " (written out)" : " (generated)")
                      << " enable_thinking=" << c.enable_thinking
                      << " add_generation_prompt=" << c.add_generation_prompt
                      << "\n  transformers: " << Json(want[i]).dump()
                      << "\n  hy:           " << Json(*got).dump();
      }
    }
    std::printf(
        "[ %-15s ] %zu conversations (%zu generated, %zu written out; %zu "
        "without the generation prompt): %zu mismatches\n",
        (std::string(model) + " chat").c_str(), cases.size(), kGeneratedCases,
        edge, without_prompt, mismatches);
    EXPECT_EQ(mismatches, 0u) << model;
  }
}

}  // namespace
}  // namespace hy::trainer
