// hyctl reshard, plan and restore on a run root the real trainer wrote: a
// step cut offline for another world size resumes exactly as the trainer's
// own elastic resume of the original root on that world size does, and a
// layout with tensor parallelism holds the same values.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hy/statestore/safetensors.h"
#include "cli/hyctl_run.h"

namespace {

namespace fs = std::filesystem;
using hy::statestore::SafetensorsReader;
using hy::testing::CmdResult;
using hy::testing::Hyctl;
using hy::testing::JsonLines;

class HyctlReshardRunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "hyctl-reshard-run-" +
                           std::to_string(getpid()));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    CmdResult train = Hyctl(
        "train -o json --iterations 4 --nproc 2 --metrics-port -1 --store " +
        Run() +
        " --set model.hidden_size=64 --set model.intermediate_size=96"
        " --set trainer.sft_steps=2 --set rollout.batch_size=16"
        " --set actor.ppo_mini_batch_size=8 --set checkpoint.save_every=2"
        " --set checkpoint.keep_last=10");
    ASSERT_EQ(train.code, 0) << train.err;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string Run() { return *dir_ + "/run"; }
  static std::string Sub(const std::string& name) { return *dir_ + "/" + name; }

  static std::string* dir_;
};

std::string* HyctlReshardRunTest::dir_ = nullptr;

// What a resumed iteration computed, without timings and memory.
nlohmann::json Values(const nlohmann::json& line) {
  nlohmann::json out;
  for (const char* key :
       {"iteration", "reward_mean", "kl", "policy_loss", "value_loss",
        "entropy", "grad_norm", "clip_frac", "world_size", "reshard_bytes"}) {
    out[key] = line.at(key);
  }
  return out;
}

TEST_F(HyctlReshardRunTest, ANewWorldResumesAsTheTrainersOwnResize) {
  const std::string out = Run() + "-fsdp3";  // The default name.
  CmdResult r = Hyctl("reshard " + Run() + " --to fsdp=3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("resharded step 4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fsdp=2, 2 ranks) to fsdp=3 (3 ranks)"),
            std::string::npos)
      << r.out;
  // The run's rollout tp 2 does not divide 3: the new config says 1.
  EXPECT_NE(r.err.find("rolls out with 1"), std::string::npos) << r.err;
  for (int node = 0; node < 3; ++node) {
    EXPECT_TRUE(
        fs::is_directory(out + "/node-" + std::to_string(node) + "/store"))
        << node;
  }
  EXPECT_FALSE(fs::exists(out + "/node-3"));
  // Every tensor of every model (parameters, moments, reference) the same.
  r = Hyctl("diff " + Run() + "@4 " + out);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("0 of "), std::string::npos) << r.out;

  // The trainer resumes the new root on 3 ranks (its recorded nproc) just
  // as it resumes the original root when told to take 3 ranks.
  const std::string copy = Sub("copy");
  fs::copy(Run(), copy, fs::copy_options::recursive);
  CmdResult resized = Hyctl(
      "train -o json --metrics-port -1 --iterations 6 "
      "--nproc 3 --resume " +
      copy);
  ASSERT_EQ(resized.code, 0) << resized.err;
  CmdResult resumed =
      Hyctl("train -o json --metrics-port -1 --iterations 6 --resume " + out);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const auto a = JsonLines(resized.out), b = JsonLines(resumed.out);
  ASSERT_EQ(a.size(), 2u) << resized.out;
  ASSERT_EQ(b.size(), 2u) << resumed.out;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(Values(b[i]), Values(a[i])) << "iteration " << i;
  }
  EXPECT_EQ(b[1]["world_size"], 3);
  EXPECT_EQ(b[1]["iteration"], 6);
}

TEST_F(HyctlReshardRunTest, TensorParallelLayoutsHoldTheSameValues) {
  const std::string tp = Sub("tp2");
  CmdResult r = Hyctl("reshard " + Run() + "@2 --to tp=2 --out " + tp);
  ASSERT_EQ(r.code, 0) << r.err;
  r = Hyctl("diff " + Run() + "@2 " + tp);
  EXPECT_EQ(r.code, 0) << r.out << r.err;

  // restore --layout takes a TP layout: rank 1's q_proj is the second half
  // of the rows of the whole tensor.
  const std::string full = Sub("full.safetensors");
  ASSERT_EQ(Hyctl("export " + Run() + "@2 --safetensors " + full).code, 0);
  r = Hyctl("restore " + Run() +
            " --step 2 --layout tp=2,dp=2 --rank 3 "
            "--out " +
            Sub("restored"));
  ASSERT_EQ(r.code, 0) << r.err;
  auto whole = SafetensorsReader::Open(full);
  auto part = SafetensorsReader::Open(Sub("restored/rank-3.safetensors"));
  ASSERT_TRUE(whole.ok() && part.ok());
  const std::string q = "actor/model.layers.0.self_attn.q_proj.weight";
  const hy::TensorMeta* wm = nullptr;
  for (const auto& t : (*whole)->tensors()) {
    if (t.meta.name == q) wm = &t.meta;
  }
  ASSERT_NE(wm, nullptr);
  const hy::TensorMeta* pm = nullptr;
  for (const auto& t : (*part)->tensors()) {
    if (t.meta.name == q) pm = &t.meta;
  }
  ASSERT_NE(pm, nullptr);
  ASSERT_EQ(pm->shape.size(), 2u);
  EXPECT_EQ(pm->shape[0] * 2, wm->shape[0]);
  EXPECT_EQ(pm->shape[1], wm->shape[1]);
  const auto w = (*whole)->TensorData(q), p = (*part)->TensorData(q);
  ASSERT_TRUE(w.ok() && p.ok());
  EXPECT_EQ(p->AsStringView(), w->AsStringView().substr(w->size() / 2));
  EXPECT_EQ((*part)->metadata().at("geometry." + q).empty(), false);
  // o_proj is row-parallel (split on dim 1): rank 3 holds the right half of
  // every row, read as one box.
  const std::string o = "actor/model.layers.1.self_attn.o_proj.weight";
  const hy::TensorMeta* om = nullptr;
  for (const auto& t : (*whole)->tensors()) {
    if (t.meta.name == o) om = &t.meta;
  }
  ASSERT_NE(om, nullptr);
  const int64_t rows = om->shape[0], cols = om->shape[1];
  const auto ow = (*whole)->TensorData(o), op = (*part)->TensorData(o);
  ASSERT_TRUE(ow.ok() && op.ok());
  std::string right;
  for (int64_t r = 0; r < rows; ++r) {
    right += std::string(
        ow->AsStringView().substr((r * cols + cols / 2) * 4, cols / 2 * 4));
  }
  EXPECT_EQ(std::string(op->AsStringView()), right);

  // plan takes the run root and a change of world size: one plan per model.
  r = Hyctl("plan --store " + Run() + "@2 --to tp=2,dp=2 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto plan = nlohmann::json::parse(r.out);
  ASSERT_EQ(plan["models"].size(), 7u) << r.out;  // 3 actor, 3 critic, ref.
  for (const auto& m : plan["models"]) {
    EXPECT_EQ(m["from"], "fsdp=2");
    EXPECT_EQ(m["world_size"], 4);
  }
  EXPECT_GT(plan["total"]["network_bytes"].get<int64_t>(), 0);
}

TEST_F(HyctlReshardRunTest, BadRequestsLeaveNothingBehind) {
  const std::string out = Sub("bad");
  // 64 heads' rows do not split 3 ways... the layout does not fit.
  CmdResult r = Hyctl("reshard " + Run() + " --to tp=3 --out " + out);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("tp=3"), std::string::npos) << r.err;
  // A step that is not committed.
  r = Hyctl("reshard " + Run() + "@3 --to fsdp=1 --out " + out);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("step 3"), std::string::npos) << r.err;
  // Options for a store, not a run root; a bad layout.
  EXPECT_EQ(
      Hyctl("reshard " + Run() + " --to fsdp=1 --new-version 9 --out " + out)
          .code,
      64);
  EXPECT_EQ(Hyctl("reshard " + Run() + " --to fsdp=x --out " + out).code, 64);
  EXPECT_EQ(
      Hyctl("reshard " + Run() + " --version-id 5 --to fsdp=1 --out " + out)
          .code,
      64);
  for (const auto& e : fs::directory_iterator(*dir_)) {
    EXPECT_EQ(e.path().filename().string().find("bad"), std::string::npos)
        << e.path();
  }
  // The run exported and imported into a plain store: its tensor names
  // say where the answer is.
  const std::string file = Sub("run.safetensors");
  ASSERT_EQ(Hyctl("export " + Run() + "@2 --safetensors " + file).code, 0);
  ASSERT_EQ(Hyctl("import " + Sub("plain") + " --safetensors " + file).code, 0);
  r = Hyctl("reshard " + Sub("plain") + " --to tp=2");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("reshard the run root itself"), std::string::npos)
      << r.err;
  // An existing directory is never written into.
  fs::create_directories(out);
  r = Hyctl("reshard " + Run() + " --to fsdp=1 --out " + out);
  EXPECT_EQ(r.code, 64) << r.err;
  EXPECT_NE(r.err.find("exists"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(out));
}

}  // namespace
