// hyctl train, run as a subprocess: the effective config (--print-config),
// usage errors, the checks of --resume before anything is created, and the
// launcher's failure handling. None of these needs a working trainer: a
// run whose prompt file is not JSON fails on every rank as it loads it.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "hy/common/gpu.h"
#include "hy/statestore/store.h"
#include "hy/trainer/config/config.h"
#include "cli/hyctl_run.h"
#include "statestore/store_test_util.h"

namespace hy::cli {
namespace {

using trainer::AdvEstimator;
using trainer::TrainConfig;

using hy::testing::CmdResult;
using hy::testing::Hyctl;
using statestore::testing::TempDir;

TrainConfig Parse(const CmdResult& r) {
  Result<TrainConfig> c = trainer::ParseConfigYaml(r.out);
  EXPECT_TRUE(c.ok()) << c.status().ToString() << "\n" << r.out;
  return c.ok() ? *c : TrainConfig{};
}

TEST(HyctlTrainTest, PrintConfigReflectsSetsAndFlags) {
  CmdResult r = Hyctl(
      "train --print-config --set actor.optim.lr=3e-4 --set algorithm=grpo "
      "--set rollout.n=4 --set task.kinds=[add] --seed 9 --iterations 7 "
      "--nproc 2 --metrics-port 0 --store /tmp/somewhere");
  ASSERT_EQ(r.code, 0) << r.err;
  const TrainConfig c = Parse(r);
  EXPECT_EQ(c.actor.optim.lr, 3e-4);
  EXPECT_EQ(c.algorithm.adv_estimator, AdvEstimator::kGrpo);
  EXPECT_EQ(c.rollout.n, 4);
  EXPECT_EQ(c.task.kinds.size(), 1u);
  EXPECT_EQ(c.trainer.seed, 9u);
  EXPECT_EQ(c.trainer.total_iterations, 7);
  EXPECT_EQ(c.trainer.nproc, 2);
  EXPECT_EQ(c.metrics.port, 0);
  EXPECT_EQ(c.checkpoint.store_root, "/tmp/somewhere");
  EXPECT_EQ(trainer::ToYaml(c), r.out);  // Printed exactly as ToYaml.
}

TEST(HyctlTrainTest, FileThenSetsThenFlags) {
  TempDir dir;
  const std::string file = dir.Sub("train.yaml");
  std::ofstream(file) << "trainer:\n  seed: 3\n  total_iterations: 5\n"
                         "actor: {clip_ratio: 0.3}\n"
                         "checkpoint: {store_root: from-file}\n";
  CmdResult r = Hyctl("train --print-config --config " + file +
                      " --set trainer.seed=4 --set trainer.total_iterations=6"
                      " --seed 5");
  ASSERT_EQ(r.code, 0) << r.err;
  TrainConfig c = Parse(r);
  EXPECT_EQ(c.trainer.seed, 5u);             // Flag over --set over file.
  EXPECT_EQ(c.trainer.total_iterations, 6);  // --set over file.
  EXPECT_EQ(c.actor.clip_ratio, 0.3);        // File over default.
  // Kept (no store flag), read against the config file's directory.
  EXPECT_EQ(c.checkpoint.store_root, dir.Sub("from-file"));

  r = Hyctl("train --print-config --config " + file + " --store-root " +
            dir.Sub("runs"));
  ASSERT_EQ(r.code, 0) << r.err;
  c = Parse(r);
  EXPECT_TRUE(std::regex_match(
      c.checkpoint.store_root,
      std::regex(dir.Sub("runs") + "/run-[0-9]{8}-[0-9]{6}(-[0-9]+)?")))
      << c.checkpoint.store_root;

  r = Hyctl("train --print-config --resume " + dir.Sub("old"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Parse(r).checkpoint.store_root, dir.Sub("old"));
}

TEST(HyctlTrainTest, DefaultStoreRoots) {
  CmdResult r = Hyctl("train --print-config");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_match(Parse(r).checkpoint.store_root,
                               std::regex("runs/run-[0-9]{8}-[0-9]{6}")))
      << r.out;
  // Under torchrun (RANK set, no config from a launcher), every rank of a
  // job must compute the same root, and another job another one: the run
  // id names it, not the port two jobs may share.
  r = Hyctl("train --print-config",
            "RANK=1 MASTER_PORT=29555 TORCHELASTIC_RUN_ID=job7");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Parse(r).checkpoint.store_root, "runs/torchrun-job7");
  r = Hyctl("train --print-config --store-root /data",
            "RANK=0 MASTER_PORT=29555 TORCHELASTIC_RUN_ID=job8");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Parse(r).checkpoint.store_root, "/data/torchrun-job8");
  r = Hyctl("train --print-config",
            "RANK=0 MASTER_PORT=29555 TORCHELASTIC_RUN_ID=job8 HY_RUN_ID=mine");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Parse(r).checkpoint.store_root, "runs/torchrun-mine");
  // torchrun's "none" (no --rdzv-id) names no run: refused, not shared.
  for (const char* env : {"RANK=0 MASTER_PORT=29555",
                          "RANK=0 MASTER_PORT=29555 TORCHELASTIC_RUN_ID=none"}) {
    r = Hyctl("train --print-config", env);
    EXPECT_EQ(r.code, 64) << env << r.out;
    EXPECT_NE(r.err.find("--rdzv-id"), std::string::npos) << r.err;
  }
  r = Hyctl("train --print-config", "RANK=0 HY_RUN_ID=a/b");
  EXPECT_EQ(r.code, 64) << r.out;
  EXPECT_NE(r.err.find("[A-Za-z0-9._-]"), std::string::npos) << r.err;
}

TEST(HyctlTrainTest, WorkerTakesTheLaunchersConfig) {
  TempDir dir;
  TrainConfig want;
  want.trainer.seed = 1234;
  want.rollout.temperature = 0.7;
  want.checkpoint.store_root = "/runs/run-x";
  std::ofstream(dir.Sub("c.yaml")) << trainer::ToYaml(want);
  // The worker ignores its own flags for the launcher's effective config.
  CmdResult r =
      Hyctl("train --print-config --worker --seed 5",
            "HY_TRAIN_CONFIG_YAML=\"$(cat " + dir.Sub("c.yaml") + ")\" RANK=0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, trainer::ToYaml(want));
  r = Hyctl("train --print-config",
            "HY_TRAIN_CONFIG_YAML='rollout: {n: x}' RANK=0");
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("HY_TRAIN_CONFIG_YAML: rollout.n"), std::string::npos)
      << r.err;
}

TEST(HyctlTrainTest, UsageErrorsNameTheKey) {
  TempDir dir;
  const std::pair<std::string, std::string> cases[] = {
      {"--set actor.optim.lrr=1", "unknown key actor.optim.lrr"},
      {"--set actor.ppo_epochs=two", "actor.ppo_epochs: expected an integer"},
      {"--set actor.optim.lr", "section.key=value"},
      {"--set rollout.temperature=0", "rollout.temperature must be positive"},
      {"--nproc 0", "trainer.nproc"},
      {"--metrics-port 70000", "metrics.port"},
      {"--set algorithm=grpo", "rollout.n must be >= 2"},
      {"--nproc 3", "rollout.tensor_model_parallel_size 2 must divide"},
      {"--store a --store-root b", "excludes"},
      {"--resume a --store b", "excludes"},
      {"--bogus", "bogus"},
  };
  for (const auto& [args, needle] : cases) {
    CmdResult r = Hyctl("train " + args);
    SCOPED_TRACE(args);
    EXPECT_EQ(r.code, 64) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  std::ofstream(dir.Sub("bad.yaml")) << "actor:\n  optim:\n    lrr: 1\n";
  CmdResult r = Hyctl("train --config " + dir.Sub("bad.yaml"));
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("bad.yaml: unknown key actor.optim.lrr (line 3)"),
            std::string::npos)
      << r.err;
  r = Hyctl("train --config " + dir.Sub("missing.yaml"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.yaml"), std::string::npos) << r.err;
}

// A config file's relative paths are read against its directory, wherever
// hyctl runs; those of --set and flags against the current directory, and
// absolute ones stay.
TEST(HyctlTrainTest, ConfigFilePathsAreRelativeToTheFile) {
  TempDir dir;
  std::filesystem::create_directories(dir.Sub("cfg"));
  std::ofstream(dir.Sub("cfg/train.yaml"))
      << "model: {path: ../models/m}\n"
         "data: {tokenizer: tok, train_files: [a.jsonl, /abs/b.jsonl],"
         " reward: python, reward_file: r.py,"
         " val_files: [v/val.jsonl]}\n"
         "checkpoint: {store_root: runs/x}\n";
  // model.path must hold a config.json; none is needed for the others.
  std::filesystem::create_directories(dir.Sub("models/m"));
  std::ofstream(dir.Sub("models/m/config.json"))
      << R"({"architectures": ["Qwen2ForCausalLM"], "vocab_size": 64,)"
      << R"( "hidden_size": 32, "intermediate_size": 48,)"
      << R"( "num_hidden_layers": 1, "num_attention_heads": 2,)"
      << R"( "num_key_value_heads": 2, "max_position_embeddings": 64,)"
      << R"( "rms_norm_eps": 1e-6, "rope_theta": 10000.0,)"
      << R"( "tie_word_embeddings": true, "eos_token_id": 1})";
  CmdResult r =
      Hyctl("train --print-config --config " + dir.Sub("cfg/train.yaml"));
  ASSERT_EQ(r.code, 0) << r.err;
  TrainConfig c = Parse(r);
  EXPECT_EQ(c.model.path, dir.Sub("models/m"));
  EXPECT_EQ(c.data.tokenizer, dir.Sub("cfg/tok"));
  EXPECT_EQ(c.data.train_files,
            (std::vector<std::string>{dir.Sub("cfg/a.jsonl"), "/abs/b.jsonl"}));
  EXPECT_EQ(c.data.val_files,
            std::vector<std::string>{dir.Sub("cfg/v/val.jsonl")});
  EXPECT_EQ(c.checkpoint.store_root, dir.Sub("cfg/runs/x"));
  EXPECT_EQ(c.data.reward_file, dir.Sub("cfg/r.py"));

  r = Hyctl("train --print-config --config " + dir.Sub("cfg/train.yaml") +
            " --set data.tokenizer=here --data rel.jsonl --store s");
  ASSERT_EQ(r.code, 0) << r.err;
  c = Parse(r);
  EXPECT_EQ(c.data.tokenizer, "here");
  EXPECT_EQ(c.data.train_files, std::vector<std::string>{"rel.jsonl"});
  EXPECT_EQ(c.checkpoint.store_root, "s");
}

// A config that parses but cannot run here is a configuration error
// (exit 78), found before any worker starts and before anything is created.
TEST(HyctlTrainTest, ConfigErrorsStopBeforeAnyWorkerStarts) {
  TempDir dir;
  std::ofstream(dir.Sub("p.jsonl"))
      << R"({"prompt": "1+1=", "answer": "2"})" << "\n";
  const std::string flags =
      " --nproc 2 --metrics-port -1 --max-restarts 0"
      " --store " +
      dir.Sub("run");
  const std::pair<std::string, std::string> cases[] = {
      // cuda on a machine without a GPU (skipped where there is one).
      {"--set trainer.device=cuda", "trainer.device cuda: "},
      {"--data " + dir.Sub("missing.jsonl"),
       "data.train_files: cannot read " + dir.Sub("missing.jsonl")},
      {"--data " + dir.Sub("p.jsonl") +
           " --set data.tokenizer=" + dir.Sub("no-tokenizer"),
       "data.tokenizer: "},
      {"--data " + dir.Sub("p.jsonl"),
       "data.train_files needs a tokenizer to read the prompts with"},
  };
  for (const auto& [args, needle] : cases) {
    SCOPED_TRACE(args);
    if (args.find("device=cuda") != std::string::npos && GpuDeviceCount() > 0) {
      continue;
    }
    CmdResult r = Hyctl("train " + args + flags);
    EXPECT_EQ(r.code, 78) << r.err;
    EXPECT_NE(r.err.find("hyctl train: configuration error: "),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("starting"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("lost"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.Sub("run")));
  }
}

// The names of the entries of directory `path`, sorted ("" if none).
std::string Listing(const std::string& path) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(path)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += n + "\n";
  return out;
}

// --resume is checked before a worker starts: a path that does not exist,
// is no run root or is a single store is named as such, and nothing is
// created in it or under it.
TEST(HyctlTrainTest, ResumeOfNoRunRootCreatesNothing) {
  TempDir dir;
  const std::string flags = " --nproc 2 --metrics-port -1 --max-restarts 0";
  CmdResult r = Hyctl("train --resume " + dir.Sub("none") + flags);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--resume: " + dir.Sub("none") + " does not exist"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("none")));

  std::filesystem::create_directories(dir.Sub("empty"));
  r = Hyctl("train --resume " + dir.Sub("empty") + flags);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(dir.Sub("empty") + " is not a run root"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(Listing(dir.Sub("empty")), "");

  const std::string store = dir.Sub("store");
  ASSERT_TRUE(statestore::Store::Open(store, {}).ok());
  const std::string before = Listing(store);
  r = Hyctl("train --resume " + store + flags);
  EXPECT_EQ(r.code, 64) << r.err;
  EXPECT_NE(r.err.find(store + " is a single store, not a run root"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("starting"), std::string::npos) << r.err;
  EXPECT_EQ(Listing(store), before);  // No node-0/, node-1/.
}

TEST(HyctlTrainTest, LauncherStopsWhenAWorkerFailsAndNamesTheRank) {
  TempDir dir;
  std::ofstream(dir.Sub("bad.jsonl")) << "not json\n";
  // Every rank fails loading the prompts.
  CmdResult r = Hyctl(
      "train --nproc 2 --metrics-port -1 --max-restarts 0"
      " --set trainer.sft_steps=0 --set data.tokenizer=" +
      std::string(HY_SOURCE_DIR) + "/configs/demo-tokenizer" + " --data " +
      dir.Sub("bad.jsonl") + " --store " + dir.Sub("run"));
  // Not a usage error: the workers found a bad prompt file, a configuration
  // error, which no restart mends.
  EXPECT_EQ(r.code, 78) << r.err;
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex("\nhyctl train: configuration error \\(rank [01] "
                        "says why above\\); not restarting\n")))
      << r.err;
  EXPECT_EQ(r.err.find("lost"), std::string::npos) << r.err;
  EXPECT_NE(
      r.err.find("hyctl train: starting 2 workers on nodes 0,1, store " +
                 dir.Sub("run")),
      std::string::npos)
      << r.err;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(
      r.err, m,
      std::regex("\nhyctl train: rank [01] exited with status [1-9][0-9]*; "
                 "stopped the other workers\n")))
      << r.err;
  // The workers' own diagnostics, prefixed by the launcher.
  EXPECT_TRUE(std::regex_search(r.err, m,
                                std::regex("\n\\[rank [01]\\] hyctl train: ")))
      << r.err;
  EXPECT_EQ(r.out, "");  // Rank 0's stdout carries report lines only.
}

// A GRPO run keeps no critic, so its store cannot continue as GAE: the
// resume says why instead of failing on missing tensors.
TEST(HyctlTrainTest, GrpoStoreDoesNotResumeAsGae) {
  TempDir dir;
  const std::string small =
      " --nproc 2 --metrics-port -1 --set model.hidden_size=32"
      " --set model.intermediate_size=64 --set trainer.sft_steps=0"
      " --set rollout.batch_size=4 --set actor.ppo_mini_batch_size=4";
  CmdResult r = Hyctl("train --iterations 2 --store " + dir.Sub("run") +
                      " --set algorithm=grpo --set rollout.n=2" + small);
  ASSERT_EQ(r.code, 0) << r.err;
  r = Hyctl("train --iterations 3 --resume " + dir.Sub("run") +
            " --set algorithm=gae --set rollout.n=1" + small);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("trained no critic"), std::string::npos) << r.err;
  // As GRPO it continues.
  r = Hyctl("train --iterations 3 --resume " + dir.Sub("run") + small);
  EXPECT_EQ(r.code, 0) << r.err;
}

}  // namespace
}  // namespace hy::cli
