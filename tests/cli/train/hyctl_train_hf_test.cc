// hyctl train on a Hugging Face directory with JSONL prompts: a sharded
// bf16 Qwen2 directory (q/k/v biases) written here, 2 iterations on 2
// ranks, export-hf (names, shapes, dtypes, config, tokenizer files), resume
// on 3 ranks continuing the data stream; and bad input refused before
// training with the file or field named.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hy/checkpoint/checkpoint.h"
#include "hy/statestore/safetensors.h"
#include "hy/trainer/hf/hf_export.h"
#include "hy/trainer/hf/hf_model.h"
#include "cli/hyctl_run.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using hy::trainer::ModelConfig;

using hy::testing::CmdResult;
using hy::testing::Hyctl;

// Everything the command printed (workers report on stdout and stderr).
std::string Said(const CmdResult& r) { return r.out + r.err; }

std::vector<Json> JsonLines(const std::string& text) {
  std::vector<Json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '{') out.push_back(Json::parse(line));
  }
  return out;
}

std::map<std::string, hy::TensorMeta> Tensors(const std::string& dir) {
  std::map<std::string, hy::TensorMeta> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    auto r = hy::statestore::SafetensorsReader::Open(e.path().string());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) continue;
    for (const auto& t : (*r)->tensors()) out[t.meta.name] = t.meta;
  }
  return out;
}

class HyctlTrainHfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "hyctl-train-hf-" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/model");
    model_.architecture = "Qwen2ForCausalLM";
    model_.vocab_size = 272;
    model_.hidden_size = 32;
    model_.intermediate_size = 48;
    model_.num_layers = 2;
    model_.num_heads = 4;
    model_.num_kv_heads = 2;
    model_.max_position_embeddings = 64;
    model_.tie_word_embeddings = true;
    model_.torch_dtype = "bfloat16";
    hy::trainer::HfExportOptions o;
    o.model = model_;
    o.dtype = hy::DType::kBF16;
    o.max_shard_bytes = 16000;
    hy::trainer::TokenSpec ids;  // configs/demo-tokenizer's.
    ids.bos = -1;
    ids.eos = {258};
    ids.pad = 256;
    o.tokens = ids;
    o.tokenizer_dir = std::string(HY_SOURCE_DIR) + "/configs/demo-tokenizer";
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    auto w = hy::trainer::WriteHfDirectory(
        dir_ + "/model", o, [&](const hy::TensorMeta& m, float* out) {
          const bool norm = m.name.find("norm") != std::string::npos;
          for (int64_t i = 0; i < *m.NumElements(); ++i) {
            out[i] = norm ? 1.0f : normal(rng);
          }
          return hy::Status::OK();
        });
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE(fs::exists(dir_ + "/model/model.safetensors.index.json"));
    CmdResult gen = Hyctl("data gen-arith " + dir_ +
                          "/arith.jsonl --count 300 --ops + --max-digits 1");
    ASSERT_EQ(gen.code, 0) << gen.out;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Flags() const {
    return " --model " + dir_ + "/model --set data.train_files=[" + dir_ +
           "/arith.jsonl] --set trainer.sft_steps=1 --set "
           "rollout.batch_size=8 --set actor.ppo_mini_batch_size=4 --set "
           "rollout.response_length=3 --set checkpoint.save_every=2";
  }

  uint64_t DataPosition(const std::string& store) {
    auto reader = hy::checkpoint::CheckpointReader::Open(store);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok()) return 0;
    auto state = (*reader)->ReadBlob("trainer.state");
    EXPECT_TRUE(state.ok());
    return state.ok() ? Json::parse(*state)["data_position"].get<uint64_t>()
                      : 0;
  }

  std::string dir_;
  ModelConfig model_;
};

TEST_F(HyctlTrainHfTest, TrainExportResumeOnThreeRanks) {
  const std::string store = dir_ + "/run";
  CmdResult train = Hyctl("train -o json --nproc 2 --iterations 2 --store " +
                          store + Flags());
  ASSERT_EQ(train.code, 0) << train.out;
  ASSERT_EQ(JsonLines(train.out).size(), 2u) << train.out;
  EXPECT_EQ(DataPosition(store), 16u);  // 2 iterations of 8 prompts.

  const std::string hf = dir_ + "/hf";
  CmdResult exp = Hyctl("export-hf " + store + " " + hf +
                        " --max-shard-size 16000");
  ASSERT_EQ(exp.code, 0) << exp.out;
  // Same tensors, shapes and dtype (the source's, bf16) as the input.
  auto in = Tensors(dir_ + "/model"), out = Tensors(hf);
  ASSERT_EQ(in.size(), out.size());
  for (const auto& [name, meta] : in) {
    ASSERT_TRUE(out.count(name)) << name;
    EXPECT_EQ(out[name].shape, meta.shape) << name;
    EXPECT_EQ(out[name].dtype, hy::DType::kBF16) << name;
    EXPECT_EQ(meta.dtype, hy::DType::kBF16) << name;
  }
  EXPECT_TRUE(in.count("model.layers.1.self_attn.q_proj.bias"));
  EXPECT_FALSE(in.count("lm_head.weight"));  // Tied.
  // config.json: the input's (ids included: the tokenizer's).
  Json a = Json::parse(std::ifstream(dir_ + "/model/config.json"));
  Json b = Json::parse(std::ifstream(hf + "/config.json"));
  EXPECT_EQ(a, b);
  EXPECT_EQ(b["eos_token_id"], 258);
  EXPECT_EQ(b["pad_token_id"], 256);
  EXPECT_TRUE(b["bos_token_id"].is_null());
  // --dtype float32: the f32 master copy.
  const std::string hf32 = dir_ + "/hf32";
  CmdResult exp32 = Hyctl("export-hf " + store + " " + hf32 +
                          " --dtype float32");
  ASSERT_EQ(exp32.code, 0) << exp32.out;
  for (const auto& [name, meta] : Tensors(hf32)) {
    EXPECT_EQ(meta.dtype, hy::DType::kF32) << name;
  }
  EXPECT_EQ(Json::parse(std::ifstream(hf32 + "/config.json"))["torch_dtype"],
            "float32");
  EXPECT_TRUE(fs::exists(hf + "/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(hf + "/tokenizer.json"));
  EXPECT_TRUE(fs::exists(hf + "/tokenizer_config.json"));
  Json gen = Json::parse(std::ifstream(hf + "/generation_config.json"));
  EXPECT_EQ(gen["eos_token_id"], 258);
  // The exported directory is itself a valid --model.
  auto back = hy::trainer::ReadHfConfig(hf);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(hy::trainer::HfWeights::Open(hf, *back).ok());

  CmdResult resumed =
      Hyctl("train -o json --nproc 3 --iterations 4 --resume " + store);
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  auto lines = JsonLines(resumed.out);
  ASSERT_EQ(lines.size(), 2u) << resumed.out;
  EXPECT_EQ(lines[0]["iteration"], 3);
  EXPECT_EQ(lines[0]["world_size"], 3);
  EXPECT_EQ(DataPosition(store), 32u);  // The stream went on, not over.
}

// data.val_files: greedy validation before the first iteration, every
// trainer.test_freq and after the last, over every held-out prompt, in
// the summary too; and it does not disturb training (the same seed gives
// the same rewards without it).
TEST_F(HyctlTrainHfTest, ValidatesHeldOutPromptsGreedily) {
  CmdResult gen = Hyctl("data gen-arith " + dir_ +
                        "/val.jsonl --count 21 --seed 9 --ops + "
                        "--max-digits 1");
  ASSERT_EQ(gen.code, 0) << gen.out;
  const std::string common =
      " -o json --nproc 2 --iterations 3 --model " + dir_ + "/model --data " +
      dir_ + "/arith.jsonl --set trainer.sft_steps=1 --set "
      "rollout.batch_size=8 --set actor.ppo_mini_batch_size=4 --set "
      "rollout.response_length=3 --set checkpoint.save_every=0";
  CmdResult with = Hyctl("train --store " + dir_ + "/v1" + common +
                         " --val-data " + dir_ +
                         "/val.jsonl --set trainer.test_freq=2");
  ASSERT_EQ(with.code, 0) << Said(with);
  CmdResult without = Hyctl("train --store " + dir_ + "/v2" + common);
  ASSERT_EQ(without.code, 0) << Said(without);
  std::vector<Json> iterations, vals;
  for (Json& j : JsonLines(with.out)) {
    (j.contains("validation") ? vals : iterations).push_back(j);
  }
  auto plain = JsonLines(without.out);
  ASSERT_EQ(iterations.size(), 3u) << with.out;
  ASSERT_EQ(plain.size(), 3u) << without.out;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(iterations[i]["reward_mean"], plain[i]["reward_mean"]) << i;
  }
  // Before iteration 1, after 2 (test_freq), after 3 (the end).
  ASSERT_EQ(vals.size(), 3u) << with.out;
  const int64_t at[] = {0, 2, 3};
  for (size_t i = 0; i < 3; ++i) {
    const Json& v = vals[i]["validation"];
    EXPECT_EQ(v["iteration"], at[i]);
    EXPECT_EQ(v["prompts"], 21);
    const double exact = v["exact_match"];
    EXPECT_GE(exact, 0.0);
    EXPECT_LE(exact, 1.0);
    // A fraction of 21 prompts.
    EXPECT_NEAR(exact * 21, std::round(exact * 21), 1e-9);
  }
  char want[64];
  std::snprintf(want, sizeof(want), "val exact match %.3f -> %.3f",
                vals[0]["validation"]["exact_match"].get<double>(),
                vals[2]["validation"]["exact_match"].get<double>());
  EXPECT_NE(with.err.find(want), std::string::npos) << with.err;
  // Held-out prompts without training prompts are refused.
  CmdResult bad = Hyctl("train --iterations 1 --store " + dir_ +
                        "/v3 --val-data " + dir_ + "/val.jsonl");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(Said(bad).find("data.val_files"), std::string::npos) << Said(bad);
}

TEST_F(HyctlTrainHfTest, BadInputIsRefusedBeforeTraining) {
  // A shard file missing.
  fs::rename(dir_ + "/model/model-00001-of-00003.safetensors",
             dir_ + "/moved.safetensors");
  CmdResult r = Hyctl("train --nproc 2 --iterations 1 --store " + dir_ +
                          "/r1" + Flags());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(Said(r).find("model-00001-of-00003.safetensors"), std::string::npos)
      << Said(r);
  fs::rename(dir_ + "/moved.safetensors",
             dir_ + "/model/model-00001-of-00003.safetensors");
  // An unsupported architecture.
  Json cfg = Json::parse(std::ifstream(dir_ + "/model/config.json"));
  Json bad = cfg;
  bad["architectures"] = {"GPT2LMHeadModel"};
  std::ofstream(dir_ + "/model/config.json") << bad.dump();
  r = Hyctl("train --iterations 1 --store " + dir_ + "/r2" + Flags());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(Said(r).find("GPT2LMHeadModel"), std::string::npos) << Said(r);
  std::ofstream(dir_ + "/model/config.json") << cfg.dump();
  // A JSONL line that is not JSON, one without a prompt.
  std::ofstream(dir_ + "/arith.jsonl", std::ios::app)
      << "{\"answer\": \"3\"}\n";
  r = Hyctl("train --nproc 2 --iterations 1 --store " + dir_ + "/r3" + Flags());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(Said(r).find("arith.jsonl:301"), std::string::npos) << Said(r);
  // A rollout TP size that does not divide the KV heads (was SIGFPE).
  r = Hyctl("train --iterations 1 --set rollout.tensor_model_parallel_size=4 "
            "--store " + dir_ + "/r4");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(Said(r).find("num_kv_heads"), std::string::npos) << Said(r);
}

}  // namespace
