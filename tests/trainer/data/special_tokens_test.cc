// The special ids a run trains with (special_tokens.h), on the real Qwen3
// and Llama 3 tokenizer files and the demo's.

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

TEST(SpecialTokensTest, Llama3EndsOnEndOfTextAndEndOfTurn) {
  auto t = Load(kShared + "/llama3");
  ASSERT_NE(t, nullptr);
  auto spec = SpecialTokensFor(*t, ChatFamily::kLlama3, {});
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
  auto spec = SpecialTokensFor(*t, ChatFamily::kQwen3, {im_end, eot, eot});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->bos, -1);  // bos_token: null.
  EXPECT_EQ(spec->eos, (std::vector<int>{im_end, eot}));
  EXPECT_EQ(spec->pad, eot);
}

TEST(SpecialTokensTest, RefusesATurnEndOrEosTheTokenizerLacks) {
  auto demo = Load(kDemo);
  ASSERT_NE(demo, nullptr);
  auto llama_turns = SpecialTokensFor(*demo, ChatFamily::kLlama3, {});
  ASSERT_FALSE(llama_turns.ok());
  EXPECT_NE(llama_turns.status().ToString().find("<|eot_id|>"),
            std::string::npos);
  TempDir dir;
  fs::copy_file(kDemo + "/tokenizer.json", dir.path() + "/tokenizer.json");
  auto bare = Load(dir.path());  // No tokenizer_config.json: no eos.
  ASSERT_NE(bare, nullptr);
  EXPECT_FALSE(SpecialTokensFor(*bare, std::nullopt, {}).ok());
  auto with_model = SpecialTokensFor(*bare, std::nullopt, {7});
  ASSERT_TRUE(with_model.ok());
  EXPECT_EQ(with_model->eos, std::vector<int>{7});
}

}  // namespace
}  // namespace hy::trainer
