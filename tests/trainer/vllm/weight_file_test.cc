// The vLLM engines' shared weight file: its layout, manifest and mapping.

#include "hy/trainer/vllm/weight_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

namespace hy::trainer {
namespace {

std::vector<TensorMeta> Model() {
  return {{"model.embed_tokens.weight", DType::kF32, {10, 3}},
          {"model.norm.weight", DType::kF32, {3}},
          {"model.layers.0.self_attn.q_proj.weight", DType::kF32, {3, 3}}};
}

TEST(WeightFileTest, TensorsInOrderAlignedInTheEngineDtype) {
  auto l = LayoutWeightFile(Model(), /*tied=*/false, DType::kBF16);
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->tensors.size(), 3u);
  EXPECT_TRUE(l->aliases.empty());
  EXPECT_EQ(l->tensors[0].offset, 0u);
  EXPECT_EQ(l->tensors[0].bytes, 60u);
  EXPECT_EQ(l->tensors[1].offset, 64u);
  EXPECT_EQ(l->tensors[1].bytes, 6u);
  EXPECT_EQ(l->tensors[2].offset, 128u);
  EXPECT_EQ(l->size, 192u);
  auto f32 = LayoutWeightFile(Model(), false, DType::kF32);
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ(f32->tensors[0].bytes, 120u);
  EXPECT_EQ(f32->tensors[1].offset, 128u);
}

TEST(WeightFileTest, TiedModelsSendTheHeadAsTheEmbeddingsBytes) {
  auto l = LayoutWeightFile(Model(), /*tied=*/true, DType::kBF16);
  ASSERT_TRUE(l.ok());
  auto m = nlohmann::json::parse(l->ManifestJson());
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[3]["name"], "lm_head.weight");
  EXPECT_EQ(m[3]["offset"], m[0]["offset"]);
  EXPECT_EQ(m[3]["shape"], m[0]["shape"]);
  EXPECT_EQ(m[0]["dtype"], "bfloat16");
  EXPECT_EQ(m[2]["name"], "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(m[2]["shape"], nlohmann::json({3, 3}));
  std::vector<TensorMeta> headless = Model();
  headless.erase(headless.begin());
  EXPECT_EQ(LayoutWeightFile(headless, true, DType::kBF16).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(LayoutWeightFile(Model(), false, DType::kF16).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EngineDType("float16").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EngineDType("bfloat16").value(), DType::kBF16);
}

TEST(WeightFileTest, RanksShareOneMappingAndTheCreatorRemovesIt) {
  const std::string path = ::testing::TempDir() + "/hy-weights-test-" +
                           std::to_string(getpid());
  {
    auto a = SharedWeightFile::Create(path, 4096);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto b = SharedWeightFile::Open(path, 4096);
    ASSERT_TRUE(b.ok());
    std::memcpy((*a)->bytes(100, 4).data(), "abcd", 4);
    EXPECT_EQ(std::memcmp((*b)->bytes(100, 4).data(), "abcd", 4), 0);
    // A layout larger than the file: not this run's file.
    EXPECT_EQ(SharedWeightFile::Open(path, 8192).status().code(),
              StatusCode::kFailedPrecondition);
    b->reset();  // An opener leaves the file.
    struct stat st;
    EXPECT_EQ(stat(path.c_str(), &st), 0);
  }
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0);
  EXPECT_EQ(SharedWeightFile::Open(path, 1).status().code(),
            StatusCode::kIOError);
  EXPECT_EQ(SharedWeightFile::Create("/nonexistent-dir/x", 10).status().code(),
            StatusCode::kIOError);
}

}  // namespace
}  // namespace hy::trainer
