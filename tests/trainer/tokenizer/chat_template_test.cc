// ChatTemplate: where a directory's template is found, and what Render
// hands transformers and gets back (messages, the generation prompt,
// variables, the turn end, the template's own errors, a renderer that
// cannot run). chat_template_hf_test.cc compares whole prompts, text and
// ids, with transformers on the real Qwen3, Llama 3 and SmolLM2 files.

#include "hy/trainer/tokenizer/chat_template.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "testing/temp_dir.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// A directory transformers can load: the demo's tokenizer.json, and a
// tokenizer_config.json holding `config` (and its eos_token).
class ChatTemplateDirTest : public ::testing::Test {
 protected:
  void WriteConfig(Json config) {
    fs::copy_file(std::string(HY_SOURCE_DIR) +
                      "/configs/demo-tokenizer/tokenizer.json",
                  dir_.path() + "/tokenizer.json",
                  fs::copy_options::overwrite_existing);
    config["eos_token"] = "<|im_end|>";
    std::ofstream(dir_.path() + "/tokenizer_config.json") << config.dump();
  }
  void WriteFile(const std::string& name, const std::string& text) {
    std::ofstream(dir_.path() + "/" + name) << text;
  }
  TempDir dir_;
};

TEST_F(ChatTemplateDirTest, FindsTheTemplateWhereTransformersDoes) {
  WriteConfig({{"chat_template", "A{{ messages[0].content }}"}});
  auto t = ChatTemplate::Load(dir_.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->text(), "A{{ messages[0].content }}");
  EXPECT_EQ(t->source(),
            dir_.path() + "/tokenizer_config.json: chat_template");

  // A list of named templates: the "default" one.
  WriteConfig({{"chat_template",
                Json::array({{{"name", "tool_use"}, {"template", "T"}},
                             {{"name", "default"}, {"template", "D"}}})}});
  t = ChatTemplate::Load(dir_.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->text(), "D");

  // chat_template.jinja (transformers 5 writes it) comes first.
  WriteFile("chat_template.jinja", "J{{ messages[0].content }}");
  t = ChatTemplate::Load(dir_.path());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->text(), "J{{ messages[0].content }}");
  EXPECT_EQ(t->source(), dir_.path() + "/chat_template.jinja");
}

TEST_F(ChatTemplateDirTest, SaysWhichFileAndFieldItCannotRead) {
  EXPECT_TRUE(ChatTemplate::Load(dir_.path()).status().IsNotFound());
  WriteConfig({{"eos_token", "x"}});
  auto none = ChatTemplate::Load(dir_.path());
  EXPECT_TRUE(none.status().IsNotFound()) << none.status();
  EXPECT_NE(none.status().message().find("\"chat_template\""),
            std::string::npos);

  WriteConfig({{"chat_template", 5}});
  auto bad = ChatTemplate::Load(dir_.path());
  ASSERT_TRUE(bad.status().IsInvalidArgument()) << bad.status();
  EXPECT_NE(bad.status().message().find("tokenizer_config.json: "
                                        "chat_template is neither"),
            std::string::npos)
      << bad.status();

  WriteConfig({{"chat_template", Json::array({{{"name", "other"}}})}});
  EXPECT_TRUE(ChatTemplate::Load(dir_.path()).status().IsInvalidArgument());

  WriteFile("tokenizer_config.json", "{not json");
  auto broken = ChatTemplate::Load(dir_.path());
  ASSERT_TRUE(broken.status().IsInvalidArgument());
  EXPECT_NE(broken.status().message().find("tokenizer_config.json"),
            std::string::npos);
}

TEST_F(ChatTemplateDirTest, RendersMessagesPromptsAndVariables) {
  WriteConfig({{"chat_template",
                "{% for m in messages %}[{{ m.role }}:{{ m.content }}]"
                "{{ eos_token }}{% endfor %}{% if add_generation_prompt %}>"
                "{% endif %}{% if flag %}F{{ n }}{% endif %}"}});
  auto t = ChatTemplate::Load(dir_.path());
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<ChatRequest> requests = {
      {{{"system", "s"}, {"user", "caf\xc3\xa9 \"q\"\n"}}, true, ""},
      {{{"user", "u"}, {"assistant", "a"}}, false, ""}};
  auto r = t->Render(requests, R"({"flag": true, "n": 7})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->texts.size(), 2u);
  EXPECT_EQ(r->texts[0],
            "[system:s]<|im_end|>[user:caf\xc3\xa9 \"q\"\n]<|im_end|>>F7");
  EXPECT_EQ(r->texts[1], "[user:u]<|im_end|>[assistant:a]<|im_end|>F7");
  EXPECT_EQ(r->turn_end, std::optional<std::string>("]<|im_end|>F7"));

  auto plain = t->Render({}, "{}");  // No requests: the turn end only.
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->texts.empty());
  EXPECT_EQ(plain->turn_end, std::optional<std::string>("]<|im_end|>"));

  EXPECT_TRUE(t->Render({}, "[1]").status().IsInvalidArgument());
}

TEST_F(ChatTemplateDirTest, TheTemplatesOwnErrorNamesTheConversation) {
  WriteConfig({{"chat_template",
                "{% if messages[0].role == 'system' %}"
                "{{ raise_exception('System role not supported') }}"
                "{% endif %}{{ messages[0].content }}"}});
  auto t = ChatTemplate::Load(dir_.path());
  ASSERT_TRUE(t.ok()) << t.status();
  auto r = t->Render({{{{"user", "fine"}}, true, "p.jsonl:1"},
                      {{{"system", "no"}}, true, "p.jsonl:2"}},
                     "{}");
  ASSERT_TRUE(r.status().IsInvalidArgument()) << r.status();
  EXPECT_EQ(r.status().message().rfind("p.jsonl:2: chat template ", 0), 0u)
      << r.status();
  EXPECT_NE(r.status().message().find("System role not supported"),
            std::string::npos)
      << r.status();
}

TEST_F(ChatTemplateDirTest, ARendererThatCannotRunSaysHowToFixIt) {
  WriteConfig({{"chat_template", "{{ messages[0].content }}"}});
  auto t = ChatTemplate::Load(dir_.path());
  ASSERT_TRUE(t.ok()) << t.status();
  const char* old = std::getenv("HY_CHAT_PYTHON");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("HY_CHAT_PYTHON", "/nonexistent/python3", 1);
  auto r = t->Render({{{{"user", "x"}}, true, ""}}, "{}");
  if (old != nullptr) {
    ::setenv("HY_CHAT_PYTHON", saved.c_str(), 1);
  } else {
    ::unsetenv("HY_CHAT_PYTHON");
  }
  ASSERT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("HY_CHAT_PYTHON"), std::string::npos);
}

}  // namespace
}  // namespace hy::trainer
