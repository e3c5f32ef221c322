// hyctl train stopped by SIGTERM, as a cluster preempts a job: the workers
// finish the iteration they are in, save and commit it, the launcher exits
// 0; resumed, the run ends bit for bit where an uninterrupted one does.
// And stopped as a terminal's Ctrl-C (or Slurm's scancel) does it: SIGINT
// to every process of the job, twice in quick succession, so that each
// worker gets it from the terminal and again from hyctl.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "hy/checkpoint/checkpoint.h"
#include "cli/hyctl_run.h"

namespace hy::cli {
namespace {

namespace fs = std::filesystem;
using hy::testing::CmdResult;
using hy::testing::RunCommand;

using hy::testing::kCleanEnv;

// Two ranks, saving only at the end (or when stopped).
const std::string kFlags =
    " --nproc 2 --set trainer.sft_steps=2 --set rollout.batch_size=16 "
    "--set actor.ppo_mini_batch_size=8 "
    "--set checkpoint.save_every=100";

std::vector<std::string> Lines(const std::string& text,
                               const std::string& needle) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (line.find(needle) != std::string::npos) out.push_back(line);
    start = end + 1;
  }
  return out;
}

// Every tensor of `root`'s newest step, as bytes.
std::map<std::string, std::vector<uint8_t>> ReadAll(const std::string& root,
                                                    uint64_t* step) {
  std::map<std::string, std::vector<uint8_t>> out;
  auto reader = checkpoint::CheckpointReader::Open(root);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  *step = (*reader)->step();
  for (const std::string& name : (*reader)->TensorNames()) {
    auto meta = (*reader)->FindTensor(name);
    EXPECT_TRUE(meta.ok());
    const int64_t n = *meta->NumElements();
    std::vector<uint8_t>& bytes = out[name];
    bytes.resize(static_cast<size_t>(n) * DTypeSize(meta->dtype));
    EXPECT_TRUE((*reader)->ReadRegion(name, {0, n}, MutableBytes(bytes)).ok())
        << name;
  }
  return out;
}

// Runs `hyctl train -o json --iterations N --store STORE` (kFlags) in the
// background from `dir` as `launch` says ("" or "setsid "), runs `stop`
// (a shell command; $p is hyctl's pid) once two iterations are reported,
// waits; out: "rc=<hyctl's exit code>" and its JSON lines, err: its stderr.
CmdResult TrainAndStop(const std::string& dir, const std::string& hyctl,
                       const std::string& launch, int iterations,
                       const std::string& store, const std::string& stop) {
  return RunCommand(
      "cd '" + dir + "' && (" + launch + hyctl + " train -o json " +
      "--iterations " + std::to_string(iterations) + " --store " + store +
      kFlags + " > out.jsonl 2> err.txt & p=$!; " +
      "for i in $(seq 1200); do [ \"$(grep -c '\"iteration\"' out.jsonl)\" " +
      "-ge 2 ] && break; sleep 0.05; done; " + stop + "; wait $p; " +
      "echo rc=$?; cat out.jsonl; cat err.txt >&2)");
}

// Checks that TrainAndStop's run exited 0 after at least 2 and fewer than
// `iterations` iterations, said it was stopped by `signal` (strsignal's
// name) and committed the iteration reached; returns that iteration (0 on
// a failure).
size_t ExpectStoppedAndCommitted(const CmdResult& stopped,
                                 const std::string& store,
                                 const std::string& signal,
                                 size_t iterations) {
  EXPECT_NE(stopped.out.find("rc=0"), std::string::npos)
      << stopped.out << stopped.err;
  const size_t reached = Lines(stopped.out, "\"iteration\"").size();
  EXPECT_GE(reached, 2u);
  EXPECT_LT(reached, iterations) << "the run ended before the signal";
  const std::string said = "hyctl train: stopped by " + signal + " after " +
                           std::to_string(reached) +
                           " iteration(s); committed step " +
                           std::to_string(reached);
  EXPECT_NE(stopped.err.find(said), std::string::npos) << stopped.err;
  uint64_t step = 0;
  ReadAll(store, &step);
  EXPECT_EQ(step, reached);
  return ::testing::Test::HasFailure() ? 0 : reached;
}

TEST(HyctlTrainStopTest, SigtermSavesTheIterationReachedAndResumesBitForBit) {
  const std::string dir =
      ::testing::TempDir() + "hyctl-stop-" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string hyctl = std::string(kCleanEnv) + HYCTL_PATH;

  CmdResult ref = RunCommand(hyctl + " train --iterations 8 --store " + dir +
                             "/ref" + kFlags);
  ASSERT_EQ(ref.code, 0) << ref.err;

  // SIGTERM to the launcher once two iterations are reported.
  const std::string cut = dir + "/cut";
  CmdResult stopped = TrainAndStop(dir, hyctl, "", 8, cut, "kill -TERM $p");
  ASSERT_GT(ExpectStoppedAndCommitted(stopped, cut, "Terminated", 8), 0u);
  EXPECT_NE(stopped.err.find("the workers saved and exited"),
            std::string::npos)
      << stopped.err;

  CmdResult resumed = RunCommand(hyctl + " train --resume " + cut +
                                 " --iterations 8" + kFlags);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  uint64_t ref_step = 0, cut_step = 0;
  const auto want = ReadAll(dir + "/ref", &ref_step);
  const auto got = ReadAll(cut, &cut_step);
  EXPECT_EQ(ref_step, 8u);
  EXPECT_EQ(cut_step, 8u);
  ASSERT_EQ(want.size(), got.size());
  ASSERT_FALSE(want.empty());
  for (const auto& [name, bytes] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    EXPECT_TRUE(it->second == bytes) << name << " differs after the resume";
  }
  fs::remove_all(dir);
}

TEST(HyctlTrainStopTest, SigintTwiceToTheProcessGroupSavesTheIterationReached) {
  const std::string dir =
      ::testing::TempDir() + "hyctl-stop-pg-" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string hyctl = std::string(kCleanEnv) + HYCTL_PATH;
  const std::string cut = dir + "/cut";
  // setsid: hyctl leads a process group of its own, as in a terminal; the
  // signal goes to the group (kill -INT -PGID), hyctl and every worker.
  CmdResult stopped = TrainAndStop(dir, hyctl, "setsid ", 40, cut,
                                   "kill -INT -$p; sleep 0.3; "
                                   "kill -INT -$p");
  const size_t reached =
      ExpectStoppedAndCommitted(stopped, cut, "Interrupt", 40);
  ASSERT_GT(reached, 0u);
  uint64_t step = 0;

  CmdResult resumed = RunCommand(hyctl + " train --resume " + cut +
                                 " --iterations " +
                                 std::to_string(reached + 2) + kFlags);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  ReadAll(cut, &step);
  EXPECT_EQ(step, reached + 2);
  fs::remove_all(dir);
}

TEST(HyctlTrainStopTest, SigtermToOneWorkerOnlyStopsTheRunAndSaves) {
  const std::string dir =
      ::testing::TempDir() + "hyctl-stop-one-" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string hyctl = std::string(kCleanEnv) + HYCTL_PATH;
  const std::string cut = dir + "/cut";
  // The signal reaches one worker (the newest child of hyctl), as a node
  // agent's does: the ranks agree on it at the iteration's end.
  CmdResult stopped =
      TrainAndStop(dir, hyctl, "", 40, cut,
                   "for c in /proc/[0-9]*; do "
                   "[ \"$(cut -d' ' -f4 $c/stat 2>/dev/null)\" = \"$p\" ] "
                   "&& w=${c#/proc/}; done; kill -TERM $w");
  EXPECT_NE(stopped.out.find("rc=0"), std::string::npos)
      << stopped.out << stopped.err;
  const size_t reached = Lines(stopped.out, "\"iteration\"").size();
  EXPECT_GE(reached, 2u);
  EXPECT_LT(reached, 40u);
  EXPECT_NE(stopped.err.find("stopped by Terminated after " +
                             std::to_string(reached) +
                             " iteration(s); committed step " +
                             std::to_string(reached)),
            std::string::npos)
      << stopped.err;
  uint64_t step = 0;
  ReadAll(cut, &step);
  EXPECT_EQ(step, reached);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hy::cli
