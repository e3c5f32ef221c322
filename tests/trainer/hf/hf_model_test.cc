// hy/trainer/hf/hf_model.h and hf_export.h: config.json of each family (the
// real files of Qwen3-0.6B, Qwen2-0.5B and Llama-3.2-1B), what is refused,
// HF directories written and read back, and bad directories.

#include "hy/trainer/hf/hf_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hy/trainer/hf/hf_export.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(HY_SOURCE_DIR) + "/tests/trainer/hf/testdata/" +
                   name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(HfConfigTest, Qwen3) {
  auto m = ParseHfConfig(Fixture("qwen3-0.6b.config.json"), "qwen3");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->family(), ModelFamily::kQwen3);
  EXPECT_EQ(m->head_dim(), 128);  // Not 1024 / 16 = 64.
  EXPECT_TRUE(m->qk_norm());
  EXPECT_FALSE(m->qkv_bias());
  EXPECT_TRUE(m->tie_word_embeddings);
  EXPECT_EQ(m->rope_theta, 1e6);
  EXPECT_EQ(m->torch_dtype, "bfloat16");
  auto tensors = ModelTensors(*m, ModelRole::kActor);
  EXPECT_EQ(tensors.back().name, "model.norm.weight");  // Tied: no lm_head.
  int64_t params = 0;
  for (const auto& t : tensors) params += *t.NumElements();
  EXPECT_EQ(params, 596049920);  // Qwen3-0.6B's published count.
}

TEST(HfConfigTest, Qwen2HasQkvBiasOnly) {
  auto m = ParseHfConfig(Fixture("qwen2-0.5b.config.json"), "qwen2");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->qkv_bias());
  EXPECT_FALSE(m->o_bias());
  EXPECT_FALSE(m->qk_norm());
  int64_t params = 0;
  for (const auto& t : ModelTensors(*m, ModelRole::kActor)) {
    params += *t.NumElements();
  }
  EXPECT_EQ(params, 494032768);  // Qwen2-0.5B.
}

TEST(HfConfigTest, Llama3RopeScaling) {
  auto m = ParseHfConfig(Fixture("llama-3.2-1b.config.json"), "llama");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->rope_scaling_type, "llama3");
  EXPECT_EQ(m->rope_scaling_factor, 32.0);
  EXPECT_EQ(m->rope_original_max_position_embeddings, 8192);
  int64_t params = 0;
  for (const auto& t : ModelTensors(*m, ModelRole::kActor)) {
    params += *t.NumElements();
  }
  EXPECT_EQ(params, 1235814400);  // Llama-3.2-1B.
}

// transformers 5 writes rope_theta and the scaling into rope_parameters
// (no top-level rope_theta / rope_scaling); the same model either way.
TEST(HfConfigTest, TransformersFiveRopeParameters) {
  Json j = Json::parse(Fixture("llama-3.2-1b.config.json"));
  auto v4 = ParseHfConfig(j.dump(), "v4");
  ASSERT_TRUE(v4.ok()) << v4.status().ToString();
  j["rope_parameters"] = j["rope_scaling"];
  j["rope_parameters"]["rope_theta"] = j["rope_theta"];
  j.erase("rope_scaling");
  j.erase("rope_theta");
  auto v5 = ParseHfConfig(j.dump(), "v5");
  ASSERT_TRUE(v5.ok()) << v5.status().ToString();
  EXPECT_EQ(v5->rope_theta, 500000.0);
  EXPECT_EQ(v5->rope_scaling_type, "llama3");
  EXPECT_EQ(v5->rope_scaling_factor, 32.0);
  EXPECT_EQ(v5->rope_original_max_position_embeddings, 8192);
  EXPECT_TRUE(SameArchitecture(*v4, *v5));
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
  auto plain = ParseHfConfig(j.dump(), "v5");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->rope_theta, 1e6);
  EXPECT_EQ(plain->rope_scaling_type, "");
}

void ExpectRefused(const std::string& fixture, const std::string& key,
                   const Json& value, const std::string& needle) {
  Json j = Json::parse(Fixture(fixture));
  if (value.is_null() && key != "rope_scaling") {
    j.erase(key);
  } else {
    j[key] = value;
  }
  auto m = ParseHfConfig(j.dump(), "dir/config.json");
  ASSERT_FALSE(m.ok()) << key;
  EXPECT_NE(m.status().ToString().find(needle), std::string::npos)
      << m.status().ToString();
  EXPECT_NE(m.status().ToString().find("dir/config.json"), std::string::npos);
}

TEST(HfConfigTest, RefusesWhatChangesTheMathAndIsNotImplemented) {
  const std::string q3 = "qwen3-0.6b.config.json";
  ExpectRefused(q3, "architectures", {"MistralForCausalLM"}, "architectures");
  ExpectRefused(q3, "hidden_act", "gelu", "hidden_act");
  ExpectRefused(q3, "use_sliding_window", true, "use_sliding_window");
  ExpectRefused(q3, "attention_dropout", 0.1, "attention_dropout");
  ExpectRefused(q3, "rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}},
                "rope_scaling.rope_type");
  ExpectRefused(q3, "torch_dtype", "float8_e4m3fn", "torch_dtype");
  ExpectRefused(q3, "hidden_size", nullptr, "hidden_size is missing");
  ExpectRefused(q3, "num_attention_heads", "16", "must be an integer");
  ExpectRefused(q3, "layer_types", {"full_attention", "sliding_attention"},
                "layer_types");
  ExpectRefused("llama-3.2-1b.config.json", "rope_scaling",
                {{"rope_type", "llama3"}, {"factor", 8.0}},
                "low_freq_factor is missing");
  ExpectRefused(q3, "rope_parameters",
                {{"rope_type", "yarn"}, {"rope_theta", 1e6}},
                "rope_parameters.rope_type");
  EXPECT_FALSE(ParseHfConfig("{not json", "x").ok());
}

class HfDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("hy_hf_dir_test_" + std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
    model_ = *ParseHfConfig(Fixture("qwen3-0.6b.config.json"), "q");
    model_.vocab_size = 64;
    model_.hidden_size = 16;
    model_.intermediate_size = 24;
    model_.num_layers = 2;
    model_.num_heads = 2;
    model_.num_kv_heads = 1;
    model_.head_dim_override = 12;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes the directory; element i of tensor t (ModelTensors order) is
  // t * 1000 + i % 250.
  void Write(DType dtype, uint64_t shard_bytes) {
    HfExportOptions o;
    o.model = model_;
    o.dtype = dtype;
    o.max_shard_bytes = shard_bytes;
    o.source_config_json = Fixture("qwen3-0.6b.config.json");
    Json j = Json::parse(o.source_config_json);
    for (const char* k :
         {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
          "num_attention_heads", "num_key_value_heads", "head_dim"}) {
      j.erase(k);
    }
    j.update(Json::parse(HfConfigJson(o)), /*merge_objects=*/false);
    for (const char* k :
         {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
          "num_attention_heads", "num_key_value_heads", "head_dim"}) {
      ASSERT_TRUE(j.contains(k));
    }
    o.source_config_json = j.dump();
    const auto metas = ModelTensors(model_, ModelRole::kActor);
    auto written =
        WriteHfDirectory(dir_, o, [&](const TensorMeta& m, float* out) {
          int t = 0;
          while (metas[t].name != m.name) ++t;
          for (int64_t i = 0; i < *m.NumElements(); ++i) {
            out[i] = static_cast<float>(t * 1000 + (i % 250));
          }
          return Status::OK();
        });
    ASSERT_TRUE(written.ok()) << written.status().ToString();
  }

  std::string dir_;
  ModelConfig model_;
};

TEST_F(HfDirTest, ShardedBf16RoundTripKeepsTheSourceConfig) {
  Write(DType::kBF16, 4096);
  ASSERT_TRUE(fs::exists(dir_ + "/model.safetensors.index.json"));
  ASSERT_TRUE(fs::exists(dir_ + "/model-00001-of-00003.safetensors") ||
              fs::exists(dir_ + "/model-00001-of-00004.safetensors"));
  Json cfg = Json::parse(std::ifstream(dir_ + "/config.json"));
  EXPECT_EQ(cfg["transformers_version"], "4.51.0");  // Kept from the source.
  EXPECT_EQ(cfg["torch_dtype"], "bfloat16");
  Json gen = Json::parse(std::ifstream(dir_ + "/generation_config.json"));
  EXPECT_EQ(gen["eos_token_id"], 151645);
  auto m = ReadHfConfig(dir_);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(SameArchitecture(*m, model_));
  auto w = HfWeights::Open(dir_, *m);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_GT((*w)->files().size(), 1u);
  std::vector<float> got(5);
  ASSERT_TRUE(
      (*w)->ReadF32("model.layers.1.self_attn.k_norm.weight", 3, 5, got.data())
          .ok());
  // k_norm of layer 1 is tensor 17 of the list: 17003.0 .. (bf16-rounded).
  const auto tensors = ModelTensors(*m, ModelRole::kActor);
  int index = 0;
  while (tensors[index].name != "model.layers.1.self_attn.k_norm.weight")
    ++index;
  EXPECT_NEAR(got[0], index * 1000 + 3, (index * 1000 + 3) / 128.0);
  EXPECT_FALSE((*w)->ReadF32("model.norm.weight", 10, 7, got.data()).ok());
}

TEST_F(HfDirTest, BadDirectoriesNameTheFileAndTensor) {
  Write(DType::kF32, 4096);
  auto m = *ReadHfConfig(dir_);
  // An index naming a tensor no file has.
  Json index =
      Json::parse(std::ifstream(dir_ + "/model.safetensors.index.json"));
  std::string shard = index["weight_map"]["model.norm.weight"];
  index["weight_map"]["model.norm.weight"] = "model-00009-of-00009.safetensors";
  std::ofstream(dir_ + "/model.safetensors.index.json") << index.dump();
  auto w = HfWeights::Open(dir_, m);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(w.status().IsNotFound()) << w.status().ToString();
  EXPECT_NE(w.status().ToString().find("model-00009-of-00009.safetensors"),
            std::string::npos);
  // The index naming the right file, but the tensor is not in it.
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (file != shard) index["weight_map"]["model.norm.weight"] = file;
  }
  std::ofstream(dir_ + "/model.safetensors.index.json") << index.dump();
  w = HfWeights::Open(dir_, m);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().ToString().find("model.norm.weight is missing from"),
            std::string::npos)
      << w.status().ToString();
  // A shape the config does not give (one file, no index).
  fs::remove_all(dir_);
  Write(DType::kF32, 1 << 30);
  ASSERT_TRUE(fs::exists(dir_ + "/model.safetensors"));
  ModelConfig wide = m;
  wide.intermediate_size = 40;
  w = HfWeights::Open(dir_, wide);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().ToString().find("has shape"), std::string::npos)
      << w.status().ToString();
  // A missing shard file; no weights at all.
  fs::remove(dir_ + "/model.safetensors");
  w = HfWeights::Open(dir_, m);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(w.status().IsNotFound());
  EXPECT_FALSE(ReadHfConfig(dir_ + "/absent").ok());
}

TEST(HfTensorParallelTest, RefusesTpThatDoesNotSplitTheHeads) {
  ModelConfig m;  // 4 heads, 2 kv heads.
  EXPECT_TRUE(ValidateTensorParallel(m, 2).ok());
  Status s = ValidateTensorParallel(m, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("num_kv_heads"), std::string::npos);
  EXPECT_NE(s.ToString().find("tensor_model_parallel_size"), std::string::npos);
}

}  // namespace
}  // namespace hy::trainer
