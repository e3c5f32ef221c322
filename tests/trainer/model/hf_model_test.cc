// hy's decoder against transformers itself, one tiny random-weight model
// per distinguishing feature of the Llama / Qwen2 / Qwen3 families:
// hf_transformers_reference.py (the build's Python; one run for every case)
// builds each model from transformers' config class, writes it with
// save_pretrained (sharded, with an index) and answers with transformers'
// own forward and generate. hy loads each directory as the trainer does and
// must give the same logits for prompts of different lengths, left-padded
// into one batch as the rollout pads them, and the same greedy
// continuations through the rollout's KV cache. Where a case names a
// feature, transformers also answers with it taken out, and those logits
// must differ from hy's by far more than the tolerance: a hy that ignored
// the feature would fail the comparison.

#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hf_model_load.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// The build's Python environment (cmake/HyTorch.cmake: .venv/ from
// scripts/install-deps.sh, with PyPI's torch and transformers).
#define kPython HY_PYTHON_PATH

struct Case {
  std::string name;   // A model of hf_transformers_reference.py's CASES.
  std::string drop;   // Taken out for the ablated answer; "" for none.
  std::string dtype;  // config.json's dtype as transformers saved it.
};

std::vector<Case> Cases() {
  return {{"llama", "", "float32"},
          {"qwen2_qkv_bias_tied", "qkv_bias", "float32"},
          {"llama_tied", "", "float32"},
          {"llama_attention_bias", "o_bias", "float32"},
          {"qwen3_head_dim", "qk_norm", "float32"},
          {"llama3_rope_scaling", "rope_scaling", "float32"},
          {"qwen3_bf16_tied", "qk_norm", "bfloat16"}};
}

// Different lengths (the batch is left-padded to the longest); 12 prompt
// and 8 new positions pass the llama3 case's original context of 16.
const std::vector<std::vector<int>> kPrompts = {
    {3, 10, 17, 24, 31, 38, 45, 4, 11, 18, 25, 32},
    {5, 9, 13, 2, 40, 33, 21},
    {1, 47, 20}};
constexpr int kNewTokens = 8;
// Both sides compute in f32 (transformers loads the bf16 case's weights as
// f32, as hy upcasts them), so one bound serves f32 and bf16 directories.
constexpr double kTolerance = 1e-4;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Largest |hy - ref| over each prompt's tokens (infinite for a shape that
// differs); hy's rows are left-padded to the batch's length, ref holds each
// prompt alone ([len][vocab]).
double MaxDiff(const at::Tensor& hy, const Json& ref) {
  if (ref.size() != kPrompts.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const int64_t len = static_cast<int64_t>(kPrompts[i].size());
    if (ref[i].size() != kPrompts[i].size()) return INFINITY;
    for (int64_t t = 0; t < len; ++t) {
      at::Tensor r = at::tensor(ref[i][t].get<std::vector<float>>());
      at::Tensor h = hy[i][hy.size(1) - len + t];
      if (r.numel() != h.numel()) return INFINITY;
      worst = std::max(worst, (h - r).abs().max().item<double>());
    }
  }
  return worst;
}

// One case against its reference.json; prints the largest differences.
void ExpectMatches(const Case& c, const fs::path& dir) {
  SCOPED_TRACE(c.name);
  const Json ref = Json::parse(ReadText(dir / "reference.json"));
  const fs::path model_dir = dir / "model";

  // hy: the directory as the trainer reads it.
  auto model = LoadHfModel(model_dir.string());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->config.torch_dtype, c.dtype);
  EXPECT_GT(model->files, 1u) << "save_pretrained wrote one shard";
  // A tied model's directory has no lm_head: hy must use the embedding.
  EXPECT_EQ(model->config.tie_word_embeddings,
            ReadText(model_dir / "model.safetensors.index.json")
                    .find("\"lm_head.weight\"") == std::string::npos);

  auto logits = PaddedLogits(*model, kPrompts);
  ASSERT_TRUE(logits.ok()) << logits.status().ToString();
  const double diff = MaxDiff(*logits, ref.at("logits"));
  std::cout << "[ hf diff ] " << c.name << " (" << c.dtype
            << "): max |hy - transformers| logit " << diff << std::endl;
  EXPECT_LE(diff, kTolerance);

  auto greedy = GreedyContinuations(*model, kPrompts, kNewTokens);
  ASSERT_TRUE(greedy.ok()) << greedy.status().ToString();
  EXPECT_EQ(*greedy, ref.at("greedy").get<std::vector<std::vector<int>>>());

  if (!c.drop.empty()) {
    const double ablated = MaxDiff(*logits, ref.at("ablated"));
    std::cout << "[ hf diff ] " << c.name << " against transformers without "
              << c.drop << ": " << ablated << std::endl;
    EXPECT_GT(ablated, 100 * std::max(diff, kTolerance))
        << c.drop << " barely changes the logits: the test would not "
        << "notice it being ignored";
  }
}

TEST(HfModelTest, EveryFamilyMatchesTransformers) {
  ASSERT_EQ(std::system(kPython " -c 'import sys, transformers; sys.exit("
                                "int(transformers.__version__.split(\".\")[0])"
                                " < 5)' 2>/dev/null"),
            0)
      << kPython << " cannot import transformers >= 5 "
      << "(scripts/install-deps.sh)";
  const fs::path dir = fs::temp_directory_path() /
                       ("hy_hf_model_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  Json input{{"prompts", kPrompts}, {"new_tokens", kNewTokens}};
  for (const Case& c : Cases()) {
    input["cases"].push_back({{"name", c.name}, {"drop", c.drop}});
  }
  std::ofstream(dir / "input.json") << input.dump();
  const std::string cmd = std::string(kPython) + " " + HY_SOURCE_DIR +
                          "/tests/trainer/model/hf_transformers_reference.py " +
                          dir.string() + " " + (dir / "input.json").string();
  ASSERT_EQ(
      std::system(
          (cmd + " > " + (dir / "python.log").string() + " 2>&1").c_str()),
      0)
      << cmd << "\n"
      << ReadText(dir / "python.log");

  at::NoGradGuard no_grad;
  for (const Case& c : Cases()) ExpectMatches(c, dir / c.name);
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace hy::trainer
