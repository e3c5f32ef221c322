// hy's decoder against an independent reference of transformers' Llama /
// Qwen2 / Qwen3 forward (hf_reference.py, run with the build's Python and PyPI's torch),
// on tiny Hugging Face directories written here with random weights, one
// per distinguishing feature of the families. Each case also runs the
// reference with that feature dropped and checks that the logits then
// differ by far more than the tolerance: a hy that ignored the feature
// would fail the comparison.

#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "hy/trainer/hf_export.h"
#include "hy/trainer/hf_model.h"
#include "model.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;

// The build's Python environment (cmake/HyTorch.cmake: .venv/ from
// scripts/install-deps.sh, with PyPI's torch).
#define kPython HY_PYTHON_PATH

struct Case {
  std::string name;
  ModelConfig model;
  std::string feature;  // Dropped in the reference run; "" for none.
  DType dtype = DType::kF32;
};

ModelConfig Base(std::string_view arch) {
  ModelConfig m;
  m.architecture = std::string(arch);
  m.vocab_size = 48;
  m.hidden_size = 32;
  m.intermediate_size = 40;
  m.num_layers = 2;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.max_position_embeddings = 256;
  m.rope_theta = 500.0;
  return m;
}

std::vector<Case> Cases() {
  std::vector<Case> out;
  out.push_back({"llama", Base(kLlamaArch), ""});
  out.push_back({"qwen2_qkv_bias", Base(kQwen2Arch), "qkv_bias"});
  Case tied{"llama_tied", Base(kLlamaArch), "tie"};
  tied.model.tie_word_embeddings = true;
  out.push_back(tied);
  Case obias{"llama_attention_bias", Base(kLlamaArch), "o_bias"};
  obias.model.attention_bias = true;
  out.push_back(obias);
  Case hd{"qwen3_head_dim", Base(kQwen3Arch), "qk_norm"};
  hd.model.head_dim_override = 16;  // != hidden / heads = 8.
  out.push_back(hd);
  Case rope{"llama3_rope_scaling", Base(kLlamaArch), "rope_scaling"};
  rope.model.rope_scaling_type = "llama3";
  rope.model.rope_scaling_factor = 8.0;
  rope.model.rope_low_freq_factor = 1.0;
  rope.model.rope_high_freq_factor = 4.0;
  rope.model.rope_original_max_position_embeddings = 16;
  out.push_back(rope);
  Case bf16{"qwen3_bf16_tied", Base(kQwen3Arch), "qk_norm", DType::kBF16};
  bf16.model.tie_word_embeddings = true;
  out.push_back(bf16);
  return out;
}

// Random weights for every tensor; norms around 1, biases non-zero, so
// every feature changes the output.
float Draw(std::mt19937* rng, const std::string& name) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  if (name.find("norm") != std::string::npos) return 1.0f + 0.3f * n(*rng);
  if (name.find("bias") != std::string::npos) return 0.5f * n(*rng);
  return 0.2f * n(*rng);
}

std::string RunCommand(const std::string& cmd) {
  return std::system(cmd.c_str()) == 0 ? "" : "failed: " + cmd;
}

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

double MaxDiff(const std::vector<float>& a, const at::Tensor& b) {
  at::Tensor t = at::from_blob(const_cast<float*>(a.data()),
                               {static_cast<int64_t>(a.size())}, at::kFloat);
  return (t - b.reshape({-1})).abs().max().item<double>();
}

std::string JoinInts(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.numel(); ++i) {
    s += (i ? "," : "") + std::to_string(t[i].item<int64_t>());
  }
  return s + "]";
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class HfModelTest : public ::testing::TestWithParam<Case> {};

TEST_P(HfModelTest, LogitsMatchTheTransformersReference) {
  ASSERT_EQ(std::system(kPython " -c 'import torch' 2>/dev/null"), 0)
      << kPython << " cannot import torch (scripts/install-deps.sh)";
  const Case& c = GetParam();
  const fs::path dir = fs::temp_directory_path() /
                       ("hy_hf_model_test_" + c.name + "_" +
                        std::to_string(::getpid()));
  fs::remove_all(dir);
  // Write the directory: random weights, config.json from ModelConfig.
  HfExportOptions o;
  o.model = c.model;
  o.dtype = c.dtype;
  o.max_shard_bytes = 20000;  // Several shards and an index.
  std::mt19937 rng(7);
  auto written = WriteHfDirectory(
      dir.string(), o, [&](const TensorMeta& m, float* out) {
        for (int64_t i = 0; i < *m.NumElements(); ++i) out[i] = Draw(&rng, m.name);
        return Status::OK();
      });
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_TRUE(fs::exists(dir / "model.safetensors.index.json"));

  // hy: read config.json back, load every tensor, forward.
  auto config = ReadHfConfig(dir.string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(SameArchitecture(*config, c.model));
  auto weights = HfWeights::Open(dir.string(), *config);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  std::map<std::string, at::Tensor> tensors;
  for (const TensorMeta& m : ModelTensors(*config, ModelRole::kActor)) {
    at::Tensor t = at::empty(m.shape, at::kFloat);
    ASSERT_TRUE(
        (*weights)->ReadF32(m.name, 0, t.numel(), t.data_ptr<float>()).ok());
    tensors[m.name] = t;
  }
  Weights w = BindWeights(*config, ModelRole::kActor, [&](const std::string& n) {
                return tensors.count(n) ? tensors[n] : at::Tensor();
              }).value();
  const int64_t len = 12;
  at::Tensor tokens = (at::arange(len, at::kLong) * 7 + 3) % c.model.vocab_size;
  at::Tensor positions = at::arange(len, at::kLong) * 9 + 5;  // Past 16.
  at::NoGradGuard no_grad;
  at::Tensor hidden = Trunk(*config, w, tokens.unsqueeze(0),
                            positions.unsqueeze(0),
                            at::ones({1, len}, at::kBool), TpContext{}, nullptr)
                          .value();
  at::Tensor logits = LmHead(w, hidden, TpContext{}).value()[0];

  // The reference, with and without the feature.
  const fs::path input = dir / "input.json";
  std::ofstream(input) << "{\"tokens\": [" << JoinInts(tokens)
                       << "], \"positions\": [" << JoinInts(positions)
                       << "]}";
  const std::string script =
      std::string(HY_SOURCE_DIR) + "/tests/trainer/torch/hf_reference.py";
  const std::string base = std::string(kPython) + " " + script + " " + dir.string() + " " +
                           input.string() + " ";
  ASSERT_EQ(RunCommand(base + (dir / "ref.bin").string()), "");
  std::vector<float> ref = ReadFloats((dir / "ref.bin").string());
  ASSERT_EQ(static_cast<int64_t>(ref.size()), logits.numel());
  const double diff = MaxDiff(ref, logits);
  const double scale = logits.abs().max().item<double>();
  EXPECT_LT(diff, 1e-4 * std::max(1.0, scale)) << c.name;
  if (!c.feature.empty()) {
    ASSERT_EQ(RunCommand(base + (dir / "ablated.bin").string() + " --ignore " +
                  c.feature),
              "");
    const double ablated = MaxDiff(ReadFloats((dir / "ablated.bin").string()),
                                   logits);
    EXPECT_GT(ablated, 100 * std::max(diff, 1e-6))
        << c.feature << " barely changes the logits: the test would not "
        << "notice it being ignored";
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, HfModelTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace hy::trainer
