// hyctl train end to end with the real trainer: a small 2-rank run with
// JSON output, hyctl inspect of a rank's store, hyctl export-hf of the
// actor (config.json + model.safetensors with Hugging Face names), and
// --resume continuing from the last committed step.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hy/common/process_memory.h"
#include "hy/statestore/safetensors.h"
#include "cli/hyctl_run.h"

namespace {

using hy::testing::CmdResult;
using hy::testing::Hyctl;
using hy::testing::JsonLines;
using hy::testing::kCleanEnv;

// Runs hyctl outside any torchrun environment; stdout in `out`.

TEST(HyctlTrainE2eTest, TrainInspectExportResume) {
  const std::string dir =
      ::testing::TempDir() + "hyctl-train-e2e-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const std::string store = dir + "/run";
  const std::string small =
      " --set model.hidden_size=64 --set model.intermediate_size=96"
      " --set trainer.sft_steps=2 --set rollout.batch_size=16"
      " --set actor.ppo_mini_batch_size=8 --set checkpoint.save_every=2"
      " --nproc 2 --store " +
      store;
  CmdResult train = Hyctl("train -o json --iterations 3" + small);
  ASSERT_EQ(train.code, 0) << train.out;
  std::vector<nlohmann::json> lines = JsonLines(train.out);
  ASSERT_EQ(lines.size(), 3u) << train.out;
  for (const char* key :
       {"iteration", "reward_mean", "kl", "policy_loss", "value_loss",
        "reshard_ms", "reshard_bytes", "checkpoint_step"}) {
    EXPECT_TRUE(lines[0].contains(key)) << key;
  }
  // Counted from 1, as the text output counts.
  EXPECT_EQ(lines[2]["iteration"], 3);
  // 3 iterations: the summary's ends are the first and the last one (not
  // all 3 twice).
  EXPECT_NE(train.err.find("mean of the first 1 iterations -> the last 1"),
            std::string::npos)
      << train.err;
  // Where memory peaks: every phase's peak, the highest being the
  // iteration's peak (one of the ranks'), and no phase without resident
  // memory.
  for (const nlohmann::json& line : lines) {
    const nlohmann::json& phases = line["phase_peak_rss_mb"];
    if (phases.empty()) {  // Only where the kernel refuses the reset.
      EXPECT_FALSE(hy::ResetPeakResident());
      continue;
    }
    ASSERT_EQ(phases.size(), 5u) << line;
    double most = 0;
    for (const char* phase :
         {"sync", "rollout", "experience", "update", "checkpoint"}) {
      ASSERT_TRUE(phases.contains(phase)) << phase;
      EXPECT_GT(phases[phase].get<double>(), 1.0) << phase;
      most = std::max(most, phases[phase].get<double>());
    }
    double peak = 0;
    for (double mb : line["peak_rss_mb"]) peak = std::max(peak, mb);
    EXPECT_DOUBLE_EQ(most, peak) << line;
  }
  // Every iteration resharded the actor; the first sends everything, the
  // later ones only what changed (sparse delta), never more.
  EXPECT_GT(lines[0]["reshard_bytes"].get<int64_t>(), 0);
  EXPECT_LE(lines[1]["reshard_bytes"].get<int64_t>(),
            lines[0]["reshard_bytes"].get<int64_t>());

  CmdResult inspect = Hyctl("inspect " + store + "/node-0/store");
  EXPECT_EQ(inspect.code, 0) << inspect.out;
  EXPECT_NE(inspect.out.find("fsdp=2"), std::string::npos) << inspect.out;

  const std::string hf = dir + "/hf";
  CmdResult exp = Hyctl("export-hf " + store + " " + hf);
  ASSERT_EQ(exp.code, 0) << exp.out;
  std::ifstream cfg_in(hf + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(cfg_in);
  EXPECT_EQ(cfg["model_type"], "llama");
  EXPECT_EQ(cfg["hidden_size"], 64);
  EXPECT_EQ(cfg["architectures"][0], "LlamaForCausalLM");
  auto reader =
      hy::statestore::SafetensorsReader::Open(hf + "/model.safetensors");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  bool found_head = false;
  for (const auto& t : (*reader)->tensors()) {
    EXPECT_EQ(t.meta.name.find('/'), std::string::npos) << t.meta.name;
    if (t.meta.name == "lm_head.weight") {
      found_head = true;
      EXPECT_EQ(t.meta.shape, (std::vector<int64_t>{32, 64}));
    }
  }
  EXPECT_TRUE(found_head);

  CmdResult resumed = Hyctl("train -o json --iterations 5 --resume " + store);
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  lines = JsonLines(resumed.out);
  ASSERT_EQ(lines.size(), 2u) << resumed.out;
  EXPECT_EQ(lines[0]["iteration"], 4);
  EXPECT_EQ(lines[1]["checkpoint_step"].get<int64_t>() >= 4, true);
  std::filesystem::remove_all(dir);
}

// What a run's pieces are, when hyctl is handed the wrong one: a rank's
// store for export and diff (not DataLoss: nothing is damaged), a store
// for a run root, a resume with no iteration left to run; and the short
// dtype names of export-hf.
TEST(HyctlTrainE2eTest, RankStoresAndFinishedRunsSayWhatTheyAre) {
  const std::string dir =
      ::testing::TempDir() + "hyctl-train-parts-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const std::string root = dir + "/run";
  const std::string rank0 = root + "/node-0/store";
  CmdResult train = hy::testing::RunCommand(
      std::string(kCleanEnv) + "HY_RUN_ID=run-parts timeout 300 " +
      HYCTL_PATH +
      " train --iterations 2 --set model.hidden_size=32"
      " --set model.intermediate_size=48 --set trainer.sft_steps=1"
      " --set rollout.batch_size=8 --set actor.ppo_mini_batch_size=8"
      " --set checkpoint.save_every=1 --nproc 2 --metrics-port -1 --store " +
      root);
  ASSERT_EQ(train.code, 0) << train.err;

  const std::string held = rank0 + " holds rank 0 of 2 of run run-parts; " +
                           "pass the run root " + root + " for whole tensors";
  CmdResult r = Hyctl("export " + rank0 + " --safetensors " + dir + "/x.st");
  EXPECT_EQ(r.code, 64) << r.err;
  EXPECT_NE(r.err.find(held), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.st"));
  r = Hyctl("diff " + rank0 + " " + rank0);
  EXPECT_EQ(r.code, 64) << r.err;
  EXPECT_NE(r.err.find(held), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  // Where a run root is wanted, the store names it.
  const std::string single = rank0 + " is a single store, not a run root";
  const std::string names = "pass the run root " + root + " that holds it";
  for (const std::string& args :
       {"restore " + rank0 + " --layout fsdp=1 --rank 0 --out " + dir + "/o",
        "export-hf " + rank0 + " " + dir + "/hf0",
        "train --metrics-port -1 --resume " + rank0}) {
    SCOPED_TRACE(args);
    r = Hyctl(args);
    EXPECT_EQ(r.code, 64) << r.err;
    EXPECT_NE(r.err.find(single), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(names), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(rank0 + "/node-0"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/hf0"));

  // Step 2 reached: --iterations 2 (also the run's own, without the flag)
  // has nothing to do.
  for (const char* iterations : {" --iterations 2", ""}) {
    r = Hyctl("train --metrics-port -1 --resume " + root + iterations);
    EXPECT_EQ(r.code, 64) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(root + " already reached iteration 2; pass "
                                "--iterations > 2 to train further"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("starting"), std::string::npos) << r.err;
  }

  const std::string hf = dir + "/hf";
  r = Hyctl("export-hf " + root + " " + hf + " --dtype bf16");
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream config(hf + "/config.json");
  EXPECT_EQ(nlohmann::json::parse(config)["torch_dtype"], "bfloat16");
  auto st = hy::statestore::SafetensorsReader::Open(hf + "/model.safetensors");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  for (const auto& t : (*st)->tensors()) {
    EXPECT_EQ(t.meta.dtype, hy::DType::kBF16) << t.meta.name;
  }
  for (const char* spelling : {"fp32", "f32"}) {
    r = Hyctl("export-hf " + root + " " + dir + "/hf-" + spelling +
              " --dtype " + spelling);
    EXPECT_EQ(r.code, 0) << spelling << ": " << r.err;
    EXPECT_NE(r.out.find(", float32) to "), std::string::npos) << r.out;
  }
  for (const char* spelling : {"fp16", "f16", "float16", "half"}) {
    r = Hyctl("export-hf " + root + " " + dir + "/hf-x --dtype " + spelling);
    EXPECT_EQ(r.code, 64) << spelling << ": " << r.err;
    EXPECT_NE(r.err.find("--dtype"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/hf-x"));
  std::filesystem::remove_all(dir);
}

// Run identity: a job of another run (another HY_RUN_ID, as two torchrun
// jobs with different --rdzv-id) pointed at a run root is refused before it
// touches it; the root's own run resumes; --allow-other-run takes it over.
// --resume --from-step N rolls a run back: refused while newer steps would
// stay (a restart would return to them), done with --drop-newer, which
// removes them from every store before the workers start.
TEST(HyctlTrainE2eTest, ResumeFromAnEarlierStepDropsTheNewerOnes) {
  const std::string dir =
      ::testing::TempDir() + "hyctl-train-rollback-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const std::string root = dir + "/run";
  const std::string flags =
      " --set model.hidden_size=32 --set model.intermediate_size=48"
      " --set trainer.sft_steps=1 --set rollout.batch_size=8"
      " --set actor.ppo_mini_batch_size=8 --set checkpoint.save_every=2"
      " --set checkpoint.keep_last=4 --nproc 2 --metrics-port -1";
  CmdResult train = Hyctl("train --iterations 8 --store " + root + flags);
  ASSERT_EQ(train.code, 0) << train.err;

  CmdResult r = Hyctl("train --iterations 8 --from-step 4" + flags);
  EXPECT_EQ(r.code, 64) << r.err;  // No --resume.
  r = Hyctl("train --resume " + root + " --iterations 8 --from-step 5" + flags);
  EXPECT_EQ(r.code, 2) << r.err;  // No such step.
  r = Hyctl("train --resume " + root + " --iterations 8 --from-step 4" + flags);
  EXPECT_EQ(r.code, 64) << r.err;
  EXPECT_NE(r.err.find("holds step(s) 6,8 after it"), std::string::npos)
      << r.err;
  CmdResult inspect = Hyctl("inspect --quick " + root);
  EXPECT_NE(inspect.out.find("recoverable: step 8"), std::string::npos)
      << inspect.out;  // Nothing dropped.

  r = Hyctl("train --resume " + root +
            " --iterations 6 --from-step 4 --drop-newer" + flags);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("dropping step(s) 6,8"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("recovered step 4"), std::string::npos) << r.err;
  inspect = Hyctl("inspect --quick -o json " + root);
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  const nlohmann::json j = nlohmann::json::parse(inspect.out);
  EXPECT_EQ(j["recover_step"], 6);
  EXPECT_EQ(j["recover_version"].get<uint64_t>() & 0xffff, 1u);  // Gen 1.
  std::filesystem::remove_all(dir);
}

TEST(HyctlTrainE2eTest, AnotherRunsStoreIsRefusedUnlessTakenOver) {
  const std::string dir =
      ::testing::TempDir() + "hyctl-train-runid-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const std::string store = dir + "/run";
  const std::string small =
      " -o json --set model.hidden_size=32 --set model.intermediate_size=48"
      " --set trainer.sft_steps=1 --set rollout.batch_size=8"
      " --set actor.ppo_mini_batch_size=8 --set checkpoint.save_every=1"
      " --nproc 2";
  auto as = [&](const std::string& run, const std::string& args) {
    return hy::testing::RunCommand(std::string(kCleanEnv) +
                                   (run.empty() ? "" : "HY_RUN_ID=" + run) +
                                   " timeout 300 " + HYCTL_PATH + " " + args);
  };
  CmdResult a = as("job-a", "train --iterations 2 --store " + store + small);
  ASSERT_EQ(a.code, 0) << a.out << a.err;
  EXPECT_NE(a.err.find("run job-a"), std::string::npos) << a.err;

  CmdResult b = as("job-b", "train --iterations 3 --resume " + store + small);
  EXPECT_NE(b.code, 0);
  EXPECT_TRUE(JsonLines(b.out).empty()) << b.out;  // Not one iteration.
  EXPECT_NE(b.err.find("belongs to run 'job-a'"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("'job-b'"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("--allow-other-run"), std::string::npos) << b.err;

  // No run id given: the recorded one is this run's, so it resumes.
  CmdResult same = as("", "train --iterations 3 --resume " + store + small);
  ASSERT_EQ(same.code, 0) << same.out << same.err;
  EXPECT_NE(same.err.find("run job-a"), std::string::npos) << same.err;
  ASSERT_EQ(JsonLines(same.out).size(), 1u) << same.out;

  CmdResult taken = as("job-b", "train --iterations 4 --allow-other-run "
                                "--resume " + store + small);
  ASSERT_EQ(taken.code, 0) << taken.out << taken.err;
  ASSERT_EQ(JsonLines(taken.out).size(), 1u) << taken.out;
  EXPECT_EQ(JsonLines(taken.out)[0]["iteration"], 4);
  // Now job-b's: job-a is the stranger.
  CmdResult back = as("job-a", "train --iterations 5 --resume " + store + small);
  EXPECT_NE(back.code, 0);
  EXPECT_NE(back.err.find("belongs to run 'job-b'"), std::string::npos)
      << back.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
