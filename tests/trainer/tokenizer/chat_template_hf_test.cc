// A prompt as hy makes it (ChatTemplate::Render, then hy's Tokenizer on
// the text with no special tokens added) against transformers'
// apply_chat_template(..., tokenize=True) and (..., tokenize=False)
// (tokenize_reference.py chat) on the real Qwen3, Llama 3 and SmolLM2
// directories of tests/data/tokenizers: the text character for character
// and the ids, on seeded generated conversations (chat_corpus.h) and
// written-out edge cases, each with its enable_thinking and
// add_generation_prompt. Render runs transformers too (chat_template.h),
// so the text checks what hy hands it and gets back; the ids check hy's
// own tokenizer on every rendered prompt. The files, the interpreter and
// transformers are required: without them the test fails.

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat_corpus.h"
#include "hy/trainer/tokenizer/chat_template.h"
#include "hy/trainer/tokenizer/tokenizer.h"
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

// What transformers renders for each case with the tokenizer of `model`:
// {"text", "ids"}.
std::vector<Json> RenderWithTransformers(
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
  std::vector<Json> out;
  if (!testing::WriteJsonValues(in, in_path) ||
      !testing::RunReference(
          {"chat", testing::TokenizerDir(model), in_path, out_path}) ||
      !testing::ReadJsonLines(out_path, &out)) {
    ADD_FAILURE() << "the reference did not run for " << model;
    out.clear();
  }
  return out;
}

// hy's rendering of every case: one Render per enable_thinking value (the
// variables are per call).
std::vector<std::string> RenderWithHy(const ChatTemplate& t,
                                      const std::vector<ChatCase>& cases) {
  std::vector<std::string> texts(cases.size());
  for (const bool thinking : {false, true}) {
    std::vector<ChatRequest> requests;
    std::vector<size_t> which;
    for (size_t i = 0; i < cases.size(); ++i) {
      if (cases[i].enable_thinking != thinking) continue;
      requests.push_back(ChatRequest{cases[i].messages,
                                     cases[i].add_generation_prompt,
                                     "case " + std::to_string(i)});
      which.push_back(i);
    }
    auto r = t.Render(requests, thinking ? R"({"enable_thinking": true})"
                                         : R"({"enable_thinking": false})");
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    for (size_t k = 0; k < which.size(); ++k) {
      texts[which[k]] = r->texts[k];
    }
  }
  return texts;
}

TEST(ChatTemplateTest, SharedFilesMatchTransformers) {
  ASSERT_TRUE(testing::ReferenceFilesExist());
  std::vector<ChatCase> cases = EdgeCases();
  const size_t edge = cases.size();
  for (ChatCase& c : testing::MakeChatCases(kGeneratedCases, 20250101)) {
    cases.push_back(std::move(c));
  }
  for (const char* model : {"qwen3", "llama3", "smollm2"}) {
    auto t = ChatTemplate::Load(testing::TokenizerDir(model));
    ASSERT_TRUE(t.ok()) << t.status();
    auto tok = Tokenizer::Load(testing::TokenizerDir(model));
    ASSERT_TRUE(tok.ok()) << tok.status();
    const std::vector<Json> want = RenderWithTransformers(model, cases);
    ASSERT_EQ(want.size(), cases.size()) << model;
    const std::vector<std::string> got = RenderWithHy(*t, cases);
    ASSERT_EQ(got.size(), cases.size()) << model;
    size_t text_mismatches = 0, id_mismatches = 0, without_prompt = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      const ChatCase& c = cases[i];
      without_prompt += c.add_generation_prompt ? 0 : 1;
      const std::string where =
          std::string(model) + " case " + std::to_string(i) +
          (i < edge ? " (written out)" : " (generated)") +
          " enable_thinking=" + std::to_string(c.enable_thinking) +
          " add_generation_prompt=" + std::to_string(c.add_generation_prompt);
      if (got[i] != want[i]["text"].get<std::string>() &&
          ++text_mismatches <= 5) {
        ADD_FAILURE() << where << "\n  transformers: " << want[i]["text"].dump()
                      << "\n  hy:           " << Json(got[i]).dump();
      }
      auto ids = (*tok)->Encode(got[i], /*add_special_tokens=*/false);
      ASSERT_TRUE(ids.ok()) << ids.status();
      const auto want_ids = want[i]["ids"].get<std::vector<int32_t>>();
      if (*ids != want_ids && ++id_mismatches <= 5) {
        ADD_FAILURE() << where << " ids\n  transformers: "
                      << Json(want_ids).dump() << "\n  hy:           "
                      << Json(*ids).dump();
      }
    }
    std::printf(
        "[ %-15s ] %zu conversations (%zu generated, %zu written out; %zu "
        "without the generation prompt): %zu text mismatches, %zu id "
        "mismatches\n",
        (std::string(model) + " chat").c_str(), cases.size(), kGeneratedCases,
        edge, without_prompt, text_mismatches, id_mismatches);
    EXPECT_EQ(text_mismatches, 0u) << model;
    EXPECT_EQ(id_mismatches, 0u) << model;
  }
}

}  // namespace
}  // namespace hy::trainer
