#include "hy/trainer/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hy::trainer {
namespace {

// Unit tests of the rendering; chat_template_hf_test.cc compares the real
// templates with transformers' own rendering. The expected strings below
// were written by hand from the template texts and checked against jinja2
// 3.1.6 rendering them as transformers does (trim_blocks, lstrip_blocks).

// The chat_template of tests/data/tokenizers/llama3 (Meta Llama 3.0
// Instruct), verbatim: it writes the generation prompt always.
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
                   bool enable_thinking = true,
                   bool add_generation_prompt = true) {
  auto r = t.Render(messages, enable_thinking, add_generation_prompt);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : "";
}

// The real tokenizer files (tests/data/tokenizers, in the repository): the tests
// that read them fail, not skip, when they are missing.
std::string SharedDir(const std::string& model) {
  return std::string(HY_TOKENIZER_DATA_DIR) + "/" + model;
}

Result<ChatTemplate> FromShared(const std::string& model) {
  return ChatTemplate::FromTokenizerConfigFile(SharedDir(model) +
                                               "/tokenizer_config.json");
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
  // As Python's str.strip(): Unicode spaces, U+0085, U+001C-U+001F go too;
  // the zero-width space (not a space to Python) stays.
  EXPECT_EQ(Render(*t, {{"user", "\u3000\xC2\xA0\xC2\x85q\x1C\u2003\u2029"},
                        {"user", "\u200Bq\u200B"}}),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
            "q<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
            "\u200Bq\u200B<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // This template writes the generation prompt whatever the caller asks.
  EXPECT_FALSE(t->generation_prompt_optional());
  EXPECT_EQ(Render(*t, kSystemUser, true, /*add_generation_prompt=*/false),
            Render(*t, kSystemUser, true, /*add_generation_prompt=*/true));
}

// Meta's later Llama 3.0 template asks add_generation_prompt.
TEST(ChatTemplateTest, Llama3GenerationPromptWhenAsked) {
  std::string text = kLlama3Template;
  const size_t at = text.rfind("{{ '<|start_header_id|>assistant");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "{% if add_generation_prompt %}");
  text += "{% endif %}";
  auto t = ChatTemplate::FromTemplateText(text, "<|begin_of_text|>");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->generation_prompt_optional());
  EXPECT_EQ(Render(*t, {{"user", "q"}, {"assistant", "a"}}, true, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
            "q<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
            "a<|eot_id|>");
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
  EXPECT_TRUE(t->generation_prompt_optional());
  EXPECT_EQ(Render(*t, kSystemUser, true, /*add_generation_prompt=*/false),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\n12+7=<|im_end|>\n");
}

// The chat_template of Qwen3 (tests/data/tokenizers/qwen3).
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
  // Without the generation prompt there is no empty thought either.
  EXPECT_EQ(Render(t, {{"user", "hi"}, {"assistant", "hello"}},
                   /*enable_thinking=*/false, /*add_generation_prompt=*/false),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n\nhello<|im_end|>\n");
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
