// hyctl train losing nodes for real: workers are SIGKILLed (and their node
// directories deleted, as a lost machine's disk), the launcher restarts the
// job on what is left, and hy::recovery rebuilds the state from primaries
// and replicas. Runs the real hyctl binary (HYCTL_PATH) with 4 ranks.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hy/checkpoint/checkpoint.h"
#include "hy/recovery/node_layout.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A small, fast model and a checkpoint every 2 iterations.
std::string SmallArgs(const std::string& root, int iterations) {
  return " -o json --nproc 4 --iterations " + std::to_string(iterations) +
         " --store " + root +
         " --set model.hidden_size=64 --set model.intermediate_size=96"
         " --set trainer.sft_steps=2 --set rollout.batch_size=16"
         " --set actor.ppo_mini_batch_size=8 --set checkpoint.save_every=2"
         " --set checkpoint.keep_last=100"
         " --set checkpoint.keep_superseded=true"
         " --set checkpoint.heartbeat_timeout_ms=3000";
}

// hyctl running in the background, its stdout and stderr in files.
class Job {
 public:
  Job(const std::string& dir, const std::string& args) : dir_(dir) {
    fs::create_directories(dir);
    const std::string cmd = std::string(HYCTL_PATH) + " train" + args + " > " +
                            dir + "/out 2> " + dir + "/err";
    pid_ = fork();
    if (pid_ == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Job() {
    if (pid_ > 0 && code_ == -2) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  std::string out() const { return Slurp(dir_ + "/out"); }
  std::string err() const { return Slurp(dir_ + "/err"); }
  // JSON lines of rank 0 so far.
  std::vector<nlohmann::json> Lines() const {
    std::vector<nlohmann::json> lines;
    std::istringstream in(out());
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object()) lines.push_back(j);
    }
    return lines;
  }
  // Waits until `pred` holds (true) or the job ends / time runs out.
  bool WaitFor(const std::function<bool()>& pred, int seconds = 120) {
    const auto end = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < end) {
      if (pred()) return true;
      if (Done()) return pred();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  bool Done() {
    if (code_ != -2) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      return true;
    }
    return false;
  }
  int Wait(int seconds = 240) {
    WaitFor([this] { return Done(); }, seconds);
    return code_;
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int code_ = -2;  // Still running.
};

pid_t WorkerPid(const std::string& root, int node) {
  std::ifstream in(hy::recovery::NodeDir(root, node) + "/worker.pid");
  pid_t pid = -1;
  in >> pid;
  return pid;
}

// Deletes a node's directory whole, as a lost disk, while its worker may
// still be writing there: a file the worker removes between remove_all's
// listing and its deletion fails that pass (ENOENT), so it goes again.
void DeleteNodeDir(const std::string& root, int node) {
  const std::string dir = hy::recovery::NodeDir(root, node);
  std::error_code ec;
  for (int pass = 0; pass < 50; ++pass) {
    fs::remove_all(dir, ec);
    if (!ec) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "cannot delete " << dir << ": " << ec.message();
}

// Kills the worker on `node` (SIGKILL) and, for a lost machine, deletes its
// directory.
void KillNode(const std::string& root, int node, bool delete_dir) {
  const pid_t pid = WorkerPid(root, node);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0) << std::strerror(errno);
  if (delete_dir) DeleteNodeDir(root, node);
}

int RandomIteration(int lo, int hi) {
  std::random_device rd;
  return std::uniform_int_distribution<int>(lo, hi)(rd);
}

// The step recovery resumed from, as the log says ("recovered step N").
int64_t RecoveredStep(const std::string& err, size_t from = 0) {
  const size_t at = err.find("recovered step ", from);
  if (at == std::string::npos) return -1;
  return std::atoll(err.c_str() + at + std::strlen("recovered step "));
}

// The state at `step` as the failed job committed it equals, bit for bit,
// the state the restarted job saved at once under its new layout (the
// newest version of `step`; the one before it is the failed job's).
void ExpectResumePointBitwiseEqual(const std::string& root, int64_t step) {
  auto after = hy::checkpoint::CheckpointReader::Open(root, step);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  const int64_t gen = hy::recovery::VersionGeneration((*after)->version());
  ASSERT_GT(gen, 0);
  auto before = hy::checkpoint::CheckpointReader::Open(root, step, gen - 1);
  for (int64_t g = gen - 2; !before.ok() && g >= 0; --g) {
    before = hy::checkpoint::CheckpointReader::Open(root, step, g);
  }
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_NE((*before)->commit().world_size, (*after)->commit().world_size);
  const std::vector<std::string> names = (*before)->TensorNames();
  ASSERT_EQ(names, (*after)->TensorNames());
  ASSERT_GT(names.size(), 10u);
  for (const std::string& name : names) {
    auto meta = (*before)->FindTensor(name);
    ASSERT_TRUE(meta.ok());
    const int64_t n = *meta->NumElements();
    std::vector<uint8_t> a(n * 4), b(n * 4);
    ASSERT_TRUE((*before)->ReadRegion(name, {0, n}, hy::MutableBytes(a)).ok());
    ASSERT_TRUE((*after)->ReadRegion(name, {0, n}, hy::MutableBytes(b)).ok());
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size())) << name;
  }
}

class HyctlRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "hyctl-recovery-" + std::to_string(getpid()) +
           "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    root_ = dir_ + "/run";
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string dir_, root_;
};

TEST_F(HyctlRecoveryTest, LostNodeJobFinishesOnThreeRanks) {
  constexpr int kIterations = 16;
  // The reference: the same run, unfailed.
  Job clean(dir_ + "/clean", SmallArgs(dir_ + "/clean-run", kIterations));
  ASSERT_EQ(clean.Wait(), 0) << clean.err();
  const auto clean_lines = clean.Lines();
  ASSERT_EQ(clean_lines.size(), static_cast<size_t>(kIterations));

  Job job(dir_ + "/job", SmallArgs(root_, kIterations));
  const int kill_at = RandomIteration(3, 8);
  ASSERT_TRUE(job.WaitFor([&] {
    return job.Lines().size() >= static_cast<size_t>(kill_at);
  })) << job.err();
  KillNode(root_, 2, /*delete_dir=*/true);
  ASSERT_EQ(job.Wait(), 0) << job.err();
  const std::string err = job.err();
  EXPECT_NE(err.find("restarting on 3 node(s)"), std::string::npos) << err;
  EXPECT_NE(err.find("replica of node 2 on node 3"), std::string::npos) << err;
  const int64_t step = RecoveredStep(err);
  ASSERT_GE(step, 2) << err;
  // No committed step is lost: the newest step committed before the kill
  // is at least the iterations done minus the checkpoint interval and the
  // one in flight.
  EXPECT_GE(step, kill_at - 4) << "killed after iteration " << kill_at;
  const auto lines = job.Lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back()["iteration"], kIterations);
  EXPECT_EQ(lines.back()["world_size"], 3);
  // The resumed state is the committed one, bit for bit.
  ExpectResumePointBitwiseEqual(root_, step);
  // The resumed job's checkpoints record the new placement: ranks on nodes
  // 0, 1, 3; each part's replica on the next rank's node.
  auto resumed = hy::checkpoint::CheckpointReader::Open(root_, step);
  ASSERT_TRUE(resumed.ok());
  auto placement = (*resumed)->ReadBlob("recovery.placement");
  ASSERT_TRUE(placement.ok()) << placement.status().ToString();
  const auto p = nlohmann::json::parse(*placement);
  EXPECT_EQ(p["nodes"], nlohmann::json({0, 1, 3}));
  EXPECT_EQ(p["replica_nodes"], nlohmann::json({{1}, {3}, {0}}));
  // Every committed version before the failure still verifies (some copy).
  for (int64_t s = 2; s <= step; s += 2) {
    auto reader = hy::checkpoint::CheckpointReader::Open(root_, s, 0);
    EXPECT_TRUE(reader.ok())
        << "step " << s << ": " << reader.status().ToString();
  }
  // The final reward is that of the unfailed run, within tolerance (a
  // different world size changes the rollout split, not the task).
  double tail = 0, clean_tail = 0;
  for (int i = kIterations - 4; i < kIterations; ++i) {
    tail += lines[lines.size() - kIterations + i]["reward_mean"].get<double>();
    clean_tail += clean_lines[i]["reward_mean"].get<double>();
  }
  EXPECT_NEAR(tail / 4, clean_tail / 4, 0.15);
}

TEST_F(HyctlRecoveryTest, KillDuringCommitAndDuringRecoveryOnASharedStore) {
  // replicas 0: the node directories live on shared storage and outlive
  // their workers. A killed worker whose directory is still there is a
  // process crash: the job restarts on the same nodes.
  Job job(dir_ + "/job", SmallArgs(root_, 14) + " --set checkpoint.replicas=0");
  // Kill rank 1 the moment a checkpoint is being saved and committed.
  ASSERT_TRUE(job.WaitFor([&] {
    const auto lines = job.Lines();
    return lines.size() >= 3 &&
           lines.back()["checkpoint_state"].get<std::string>().rfind("saving",
                                                                     0) == 0;
  })) << job.err();
  KillNode(root_, 1, /*delete_dir=*/false);
  // Then kill the restarted worker on node 3 while it recovers.
  const pid_t old3 = WorkerPid(root_, 3);
  ASSERT_TRUE(job.WaitFor([&] {
    const pid_t p = WorkerPid(root_, 3);
    return p > 0 && p != old3;
  })) << job.err();
  KillNode(root_, 3, /*delete_dir=*/false);
  ASSERT_EQ(job.Wait(), 0) << job.err();
  const std::string err = job.err();
  EXPECT_NE(err.find("restart 2"), std::string::npos) << err;
  const auto lines = job.Lines();
  EXPECT_EQ(lines.back()["iteration"], 14);
  EXPECT_EQ(lines.back()["world_size"], 4);
  const int64_t step = RecoveredStep(err, err.rfind("recovered step "));
  ASSERT_GE(step, 2) << err;

  // The shared store continued on 3 workers: node 3's store is read in
  // place by rank 0 (no replica needed), bit for bit.
  Job more(dir_ + "/more",
           " -o json --nproc 3 --iterations 16 --resume " + root_);
  ASSERT_EQ(more.Wait(), 0) << more.err();
  EXPECT_EQ(RecoveredStep(more.err()), 14) << more.err();
  EXPECT_EQ(more.Lines().back()["world_size"], 3);
  ExpectResumePointBitwiseEqual(root_, 14);
}

TEST_F(HyctlRecoveryTest, EveryCopyLostEndsWithAClearError) {
  Job job(dir_ + "/job", SmallArgs(root_, 40));
  ASSERT_TRUE(job.WaitFor([&] { return job.Lines().size() >= 4; }))
      << job.err();
  // Rank 1's primary (node 1) and its only replica (node 2) both go.
  DeleteNodeDir(root_, 2);
  KillNode(root_, 1, /*delete_dir=*/true);
  EXPECT_EQ(job.Wait(), hy::recovery::kExitUnrecoverable) << job.err();
  const std::string err = job.err();
  EXPECT_NE(err.find("every copy of old rank(s) 1"), std::string::npos) << err;
  EXPECT_NE(err.find("unrecoverable"), std::string::npos) << err;
}

TEST_F(HyctlRecoveryTest, FewerNodesThanMinNodesEndsWithAClearError) {
  Job job(dir_ + "/job", SmallArgs(root_, 40) + " --min-nodes 4");
  ASSERT_TRUE(job.WaitFor([&] { return job.Lines().size() >= 2; }))
      << job.err();
  KillNode(root_, 3, /*delete_dir=*/true);
  EXPECT_EQ(job.Wait(), hy::recovery::kExitUnrecoverable) << job.err();
  EXPECT_NE(job.err().find("fewer than --min-nodes 4"), std::string::npos)
      << job.err();
}

// A rank that hangs (SIGSTOP) rather than dies: its sockets stay open, so
// no collective fails and the launcher sees no exit. Rank 0 is the worst
// case: it hosts the store the heartbeats go through, so the others' store
// calls block instead of failing; their heartbeat watchdog must see that,
// and the launcher must not wait for a stopped worker to exit.
TEST_F(HyctlRecoveryTest, HungRankZeroIsDetectedAndTheJobFinishes) {
  constexpr int kIterations = 12;
  Job job(dir_ + "/job", SmallArgs(root_, kIterations));
  ASSERT_TRUE(job.WaitFor([&] { return job.Lines().size() >= 4; }))
      << job.err();
  const pid_t rank0 = WorkerPid(root_, 0);
  ASSERT_GT(rank0, 0);
  const auto stopped = Clock::now();
  ASSERT_EQ(kill(rank0, SIGSTOP), 0) << std::strerror(errno);
  ASSERT_TRUE(job.WaitFor(
      [&] { return job.err().find("restarting on") != std::string::npos; },
      60))
      << "a hung rank 0 was not detected within 60 s:\n" << job.err();
  const double detect =
      std::chrono::duration<double>(Clock::now() - stopped).count();
  EXPECT_EQ(job.Wait(), 0) << job.err();
  const std::string err = job.err();
  EXPECT_NE(err.find("heartbeat store: no answer for"), std::string::npos)
      << err;
  auto reader = hy::checkpoint::CheckpointReader::Open(root_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->step(), static_cast<uint64_t>(kIterations));
  std::printf("hung rank 0 detected and the job restarted %.1f s after "
              "SIGSTOP (heartbeat timeout 3 s)\n",
              detect);
}

// The trainer's commit (two-phase, over the transport) and the replication
// after it killed at each of their points (hy/common/crash_point.h) at
// step 4 of a 2-rank run with no
// restart left: the next reader loads the newest step rank 0 decided (4
// once rank 0 wrote its decision, even where rank 1 never copied it; 2
// before), and --resume goes on to the end from there.
TEST_F(HyctlRecoveryTest, EveryCommitCrashPointLeavesTheDecidedStepLoadable) {
  const struct {
    const char* at;
    uint64_t want;
  } kPoints[] = {{"commit.prepared:1:4", 2},
                 {"commit.prepared:0:4", 2},
                 {"commit.decided:0:4", 4},
                 {"commit.before_follow:1:4", 4},
                 {"commit.followed:1:4", 4},
                 {"replicate.prepared:1:4", 4},
                 {"replicate.committed:0:4", 4}};
  std::string args = SmallArgs("ROOT", 8);
  args.replace(args.find(" --nproc 4"), 10, " --nproc 2");
  int i = 0;
  for (const auto& p : kPoints) {
    SCOPED_TRACE(p.at);
    const std::string root = dir_ + "/run" + std::to_string(i++);
    std::string a = args;
    a.replace(a.find("ROOT"), 4, root);
    setenv("HY_TEST_CRASH_AT", p.at, 1);
    Job job(root + "-job", a + " --max-restarts 0");
    unsetenv("HY_TEST_CRASH_AT");
    EXPECT_NE(job.Wait(), 0) << job.err();
    EXPECT_NE(job.err().find("hy: crash point " +
                             std::string(p.at).substr(
                                 0, std::string(p.at).find(':'))),
              std::string::npos)
        << job.err();
    {
      auto reader = hy::checkpoint::CheckpointReader::Open(root);
      ASSERT_TRUE(reader.ok()) << reader.status().ToString();
      EXPECT_EQ((*reader)->step(), p.want);
    }
    Job resumed(root + "-resume",
                " -o json --nproc 2 --resume " + root + " --iterations 8");
    EXPECT_EQ(resumed.Wait(), 0) << resumed.err();
    EXPECT_NE(resumed.err().find("recovered step " + std::to_string(p.want)),
              std::string::npos)
        << resumed.err();
    auto reader = hy::checkpoint::CheckpointReader::Open(root);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    EXPECT_EQ((*reader)->step(), 8u);
  }
}

// Opt-in (HY_SOAK=1): 20 random failures in one long run, workers killed
// at random moments (every fifth one with its node directory, while more
// than two nodes are left); the run must finish and no recovery may go back
// before a step that rank 0 had reported committed.
TEST_F(HyctlRecoveryTest, Soak) {
  if (std::getenv("HY_SOAK") == nullptr) {
    GTEST_SKIP() << "opt-in: HY_SOAK=1 "
                 << "hy_cli_recovery_test "
                 << "--gtest_filter='*Soak*'";
  }
  Job job(dir_ + "/job", SmallArgs(root_, 400) + " --max-restarts 25");
  std::mt19937 rng(std::random_device{}());
  std::vector<int64_t> committed_before;  // Per failure.
  int deleted = 0;
  for (int failure = 0; failure < 20; ++failure) {
    const size_t target = job.Lines().size() + 2 + rng() % 4;
    ASSERT_TRUE(job.WaitFor([&] { return job.Lines().size() >= target; }))
        << job.err();
    auto nodes = hy::recovery::ListNodes(root_);
    ASSERT_TRUE(nodes.ok());
    const int node = (*nodes)[rng() % nodes->size()];
    const auto lines = job.Lines();
    committed_before.push_back(lines.back()["checkpoint_step"].get<int64_t>());
    const bool lose = failure % 5 == 4 && nodes->size() > 2;
    deleted += lose ? 1 : 0;
    KillNode(root_, node, lose);
    // Wait for the restarted job to report an iteration again.
    const size_t now = job.Lines().size();
    ASSERT_TRUE(job.WaitFor([&] { return job.Lines().size() > now; }))
        << job.err();
  }
  ASSERT_EQ(job.Wait(1200), 0) << job.err();
  const std::string err = job.err();
  std::vector<int64_t> recovered;
  for (size_t at = err.find("recovered step "); at != std::string::npos;
       at = err.find("recovered step ", at + 1)) {
    recovered.push_back(RecoveredStep(err, at));
  }
  ASSERT_GE(recovered.size(), 20u) << err;
  for (size_t i = 0; i < 20 && i < recovered.size(); ++i) {
    EXPECT_GE(recovered[i], committed_before[i]) << "failure " << i;
  }
  EXPECT_EQ(job.Lines().back()["iteration"], 400);
  std::printf(
      "soak: 20 failures (%d nodes lost), %zu recoveries, 0 "
      "committed steps lost\n",
      deleted, recovered.size());
}

}  // namespace
