#include "hy/trainer/data/prompt_data.h"

#include <gtest/gtest.h>

#include <string>

#include "testing/temp_dir.h"

namespace hy::trainer {
namespace {

// Expects `text` (one file called f.jsonl) to fail with InvalidArgument
// whose message holds `needle`.
void ExpectBad(std::string_view text, std::string_view needle) {
  auto d = PromptDataset::FromText(text, "f.jsonl");
  ASSERT_FALSE(d.ok()) << text;
  EXPECT_TRUE(d.status().IsInvalidArgument()) << d.status();
  EXPECT_NE(d.status().message().find(needle), std::string_view::npos)
      << d.status() << " lacks " << needle;
}

TEST(PromptDataTest, StringAndChatPromptsWithFields) {
  const char* text =
      "{\"prompt\": \"1+1=\", \"answer\": \"2\", \"level\": 3}\n"
      "\n"
      "  \r\n"
      "{\"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
      " {\"role\": \"user\", \"content\": \"2+2=\"}], \"answer\": 4,"
      " \"tags\": [\"a\"]}\r\n";
  auto d = PromptDataset::FromText(text, "f.jsonl");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 2u);
  const PromptRecord& a = d->record(0);
  EXPECT_FALSE(a.prompt.is_chat);
  EXPECT_EQ(a.prompt.text, "1+1=");
  EXPECT_EQ(a.answer, "2");
  EXPECT_EQ(a.fields.at("level"), "3");
  EXPECT_EQ(a.fields.count("prompt"), 0u);
  EXPECT_EQ(a.source, "f.jsonl:1");
  const PromptRecord& b = d->record(1);
  ASSERT_TRUE(b.prompt.is_chat);
  ASSERT_EQ(b.prompt.messages.size(), 2u);
  EXPECT_EQ(b.prompt.messages[0], (ChatMessage{"system", "Be brief."}));
  EXPECT_EQ(b.prompt.messages[1], (ChatMessage{"user", "2+2="}));
  EXPECT_EQ(b.answer, "4");  // A number keeps its JSON text.
  EXPECT_EQ(b.fields.at("tags"), "[\"a\"]");
  EXPECT_EQ(b.source, "f.jsonl:4");  // Blank lines count.
}

TEST(PromptDataTest, BadLinesNameFileLineAndField) {
  ExpectBad("{\"prompt\": \"a\"}\n{oops\n", "f.jsonl:2: not JSON");
  ExpectBad("[1, 2]\n", "f.jsonl:1: not a JSON object");
  ExpectBad("\"text\"\n", "f.jsonl:1: not a JSON object");
  ExpectBad("{\"answer\": \"1\"}\n", "f.jsonl:1: no \"prompt\"");
  ExpectBad("{\"prompt\": 7}\n", "\"prompt\" must be a string or");
  ExpectBad("{\"prompt\": []}\n", "non-empty list");
  ExpectBad("{\"prompt\": [\"hi\"]}\n", "prompt[0] is not an object");
  ExpectBad("{\"prompt\": [{\"content\": \"x\"}]}\n",
            "f.jsonl:1: prompt[0] lacks a string \"role\"");
  ExpectBad("{\"prompt\": [{\"role\": \"user\"}]}\n",
            "prompt[0] lacks a string \"content\"");
  ExpectBad(
      "{\"prompt\": [{\"role\": \"user\", \"content\": \"a\"}, "
      "{\"role\": \"tool\", \"content\": \"b\"}]}\n",
      "prompt[1].role \"tool\" is not system, user or assistant");
  ExpectBad("{\"prompt\": \"\xff\xfe\"}\n", "f.jsonl:1: not JSON");
}

TEST(PromptDataTest, EmptyIsAnError) {
  ExpectBad("", "no record");
  ExpectBad("\n \n\t\n", "no record");
}

TEST(PromptDataTest, LoadsFilesInOrder) {
  TempDir dir;
  const std::string a = dir.WriteFile(
      "a.jsonl", "\xEF\xBB\xBF{\"prompt\": \"a1\"}\n{\"prompt\": \"a2\"}");
  const std::string b = dir.WriteFile("b.jsonl", "{\"prompt\": \"b1\"}\n");
  auto d = PromptDataset::Load({a, b});
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 3u);
  EXPECT_EQ(d->record(0).prompt.text, "a1");
  EXPECT_EQ(d->record(1).prompt.text, "a2");
  EXPECT_EQ(d->record(2).prompt.text, "b1");
  EXPECT_EQ(d->record(2).source, b + ":1");
}

TEST(PromptDataTest, FileErrors) {
  TempDir dir;
  const std::string missing = dir.path() + "/missing.jsonl";
  auto d = PromptDataset::Load({missing});
  ASSERT_TRUE(d.status().IsNotFound()) << d.status();
  EXPECT_NE(d.status().message().find(missing), std::string_view::npos);

  EXPECT_TRUE(PromptDataset::Load({}).status().IsInvalidArgument());
  const std::string empty = dir.WriteFile("empty.jsonl", "");
  EXPECT_TRUE(PromptDataset::Load({empty}).status().IsInvalidArgument());
  EXPECT_TRUE(PromptDataset::Load({dir.path()}).status().IsInvalidArgument());

  const std::string bad = dir.WriteFile("bad.jsonl", "{\"prompt\": \"a\"}\n{");
  d = PromptDataset::Load({bad});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find(bad + ":2:"), std::string_view::npos)
      << d.status();
}

TEST(PromptDataTest, FingerprintFollowsContentsAndOrder) {
  TempDir dir;
  const std::string a = dir.WriteFile("a.jsonl", "{\"prompt\": \"a\"}\n");
  const std::string b = dir.WriteFile("b.jsonl", "{\"prompt\": \"b\"}\n");
  const std::string a2 = dir.WriteFile("a2.jsonl", "{\"prompt\": \"a\"}\n");
  auto ab = PromptDataset::Load({a, b});
  auto ba = PromptDataset::Load({b, a});
  auto a2b = PromptDataset::Load({a2, b});
  ASSERT_TRUE(ab.ok() && ba.ok() && a2b.ok());
  EXPECT_EQ(ab->fingerprint(), a2b->fingerprint());  // Names do not count.
  EXPECT_NE(ab->fingerprint(), ba->fingerprint());
  const std::string b_edit = dir.WriteFile("b.jsonl", "{\"prompt\": \"B\"}\n");
  auto edited = PromptDataset::Load({a, b_edit});
  ASSERT_TRUE(edited.ok());
  EXPECT_NE(ab->fingerprint(), edited->fingerprint());
}

}  // namespace
}  // namespace hy::trainer
