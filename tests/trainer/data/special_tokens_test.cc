// The special ids a run trains with (special_tokens.h), on the real Qwen3,
// Llama 3 and SmolLM2 tokenizer files and the demo's; the turn ends come
// from each chat template as transformers renders it (TurnEndOf).

#include "hy/trainer/data/special_tokens.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "testing/temp_dir.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Tokenizer> Load(const std::string& path) {
  auto t = Tokenizer::Load(path);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

int Id(const Tokenizer& t, std::string_view token) {
  auto id = t.TokenToId(token);
  EXPECT_TRUE(id.has_value()) << token;
  return id ? *id : -1;
}

const std::string kShared = HY_TOKENIZER_DATA_DIR;
const std::string kDemo =
    std::string(HY_SOURCE_DIR) + "/configs/demo-tokenizer";

std::optional<std::string> TurnEnd(const std::string& dir) {
  auto t = TurnEndOf(dir);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : std::nullopt;
}

TEST(SpecialTokensTest, Llama3EndsOnEndOfTextAndEndOfTurn) {
  auto t = Load(kShared + "/llama3");
  ASSERT_NE(t, nullptr);
  const auto turn_end = TurnEnd(kShared + "/llama3");
  ASSERT_TRUE(turn_end.has_value());
  EXPECT_EQ(turn_end->rfind("<|eot_id|>", 0), 0u) << *turn_end;
  auto spec = SpecialTokensFor(*t, turn_end, {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->bos, Id(*t, "<|begin_of_text|>"));
  EXPECT_EQ(spec->eos, (std::vector<int>{Id(*t, "<|end_of_text|>"),
                                         Id(*t, "<|eot_id|>")}));
  EXPECT_EQ(spec->pad, spec->eos.front());  // No pad_token: the first eos.
}

TEST(SpecialTokensTest, Qwen3AddsTheModelsEosOnce) {
  auto t = Load(kShared + "/qwen3");
  ASSERT_NE(t, nullptr);
  const int im_end = Id(*t, "<|im_end|>"), eot = Id(*t, "<|endoftext|>");
  const auto turn_end = TurnEnd(kShared + "/qwen3");
  EXPECT_EQ(turn_end, std::optional<std::string>("<|im_end|>\n"));
  auto spec = SpecialTokensFor(*t, turn_end, {im_end, eot, eot});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->bos, -1);  // bos_token: null.
  EXPECT_EQ(spec->eos, (std::vector<int>{im_end, eot}));
  EXPECT_EQ(spec->pad, eot);
}

TEST(SpecialTokensTest, SmolLm2EndsOnImEnd) {
  auto t = Load(kShared + "/smollm2");
  ASSERT_NE(t, nullptr);
  const int im_end = Id(*t, "<|im_end|>");
  auto spec = SpecialTokensFor(*t, TurnEnd(kShared + "/smollm2"), {im_end});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->bos, Id(*t, "<|im_start|>"));
  EXPECT_EQ(spec->eos, std::vector<int>{im_end});
  EXPECT_EQ(spec->pad, im_end);
}

TEST(SpecialTokensTest, PlainTurnEndsAddNothingAndNoEosIsRefused) {
  auto demo = Load(kDemo);
  ASSERT_NE(demo, nullptr);
  auto plain = SpecialTokensFor(*demo, std::string("\n\n"), {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->eos.size(), 1u);  // Only the demo's eos_token.
  TempDir dir;
  fs::copy_file(kDemo + "/tokenizer.json", dir.path() + "/tokenizer.json");
  auto bare = Load(dir.path());  // No tokenizer_config.json: no eos.
  ASSERT_NE(bare, nullptr);
  EXPECT_FALSE(TurnEnd(dir.path()).has_value());  // No chat template.
  EXPECT_FALSE(SpecialTokensFor(*bare, std::nullopt, {}).ok());
  auto with_model = SpecialTokensFor(*bare, std::nullopt, {7});
  ASSERT_TRUE(with_model.ok());
  EXPECT_EQ(with_model->eos, std::vector<int>{7});
}

}  // namespace
}  // namespace hy::trainer
