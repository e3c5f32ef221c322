// Multi-process tests of the trainer over real c10d Gloo on 127.0.0.1: the
// test starts hy_trainer_test_worker once per rank (fork + exec) with
// torchrun's environment; rank 0 hosts the TCPStore on a free port.
//
//   - one FSDP Adam step on 2 and 3 ranks equals the unsharded step;
//   - the TP forward equals the whole forward;
//   - a short 2-rank PPO run raises the reward;
//   - a run stopped and resumed on the same world size reports the same
//     per-iteration figures bit for bit as the uninterrupted run;
//   - a run saved on 4 ranks and resumed on 3 stays within tolerance.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "hy/common/gpu.h"
#include "hy/statestore/store.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

pid_t Spawn(const std::vector<std::string>& args,
            const std::map<std::string, std::string>& extra_env) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (extra_env.count(kv.substr(0, kv.find('='))) == 0) {
      env_strings.push_back(kv);
    }
  }
  for (const auto& [k, v] : extra_env) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env_strings)
    envp.push_back(const_cast<char*>(e.c_str()));
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

// Runs `world` workers with `args`; returns true if all exit 0 within the
// deadline (the others are killed).
bool RunJob(int world, const std::vector<std::string>& args,
            int deadline_s = 240) {
  const int port = FreePort();
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> a = {HY_TRAINER_WORKER_PATH};
    a.insert(a.end(), args.begin(), args.end());
    pids.push_back(Spawn(a, {{"RANK", std::to_string(r)},
                             {"LOCAL_RANK", std::to_string(r)},
                             {"WORLD_SIZE", std::to_string(world)},
                             {"MASTER_ADDR", "127.0.0.1"},
                             {"MASTER_PORT", std::to_string(port)},
                             {"OMP_NUM_THREADS", "1"}}));
  }
  bool ok = true;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(deadline_s);
  std::vector<bool> done(world, false);
  int left = world;
  while (left > 0) {
    for (int r = 0; r < world; ++r) {
      if (done[r]) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --left;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ADD_FAILURE() << "rank " << r << " failed (status " << status << ")";
        ok = false;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "job hung; killed";
      for (int r = 0; r < world; ++r) {
        if (!done[r]) kill(pids[r], SIGKILL), waitpid(pids[r], nullptr, 0);
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ok;
}

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

std::vector<std::vector<double>> ReadReports(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<double>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::vector<double> row;
    double x;
    while (s >> x) row.push_back(x);
    rows.push_back(row);
  }
  return rows;
}

class TrainerDistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hy_trainer_dist_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A small, fast config; `extra` YAML lines are appended per section.
  // With `by_layer`, FSDP by decoder layer (trainer.fsdp_per_layer) and
  // GRPO (4 responses per prompt, no critic) instead of GAE. `offload`:
  // trainer fields appended (", offload_reference: true").
  std::string WriteConfig(const std::string& name, int iterations,
                          int rollout_tp, const std::string& root,
                          bool grpo = false, bool by_layer = false,
                          const std::string& offload = "") {
    std::ostringstream y;
    y << "model: {hidden_size: 64, intermediate_size: 128, num_layers: 2, "
         "num_heads: 4, num_kv_heads: 2}\n"
      << "task: {kinds: [reverse], min_digits: 1, max_digits: 4}\n"
      << "actor: {ppo_epochs: 2, ppo_mini_batch_size: 16, optim: {lr: 0.002}}\n"
      << "critic: {optim: {lr: 0.002}}\n"
      << "algorithm: {" << (grpo ? "adv_estimator: grpo, " : "")
      << "kl_ctrl: {type: fixed, kl_coef: 0.01}}\n"
      << "rollout: {tensor_model_parallel_size: " << rollout_tp
      << ", batch_size: " << (grpo ? 8 : 32) << ", n: " << (grpo ? 4 : 1)
      << ", response_length: 6}\n"
      << "trainer: {total_iterations: " << iterations
      << ", seed: 11, sft_steps: 12, sft_batch_size: 32, nproc: 2"
      << (by_layer ? ", fsdp_per_layer: true" : "") << offload << "}\n"
      << "checkpoint: {store_root: " << root
      << ", save_every: 2, keep_last: 2}\n";
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << y.str();
    return path;
  }

  // Rank 0's reports of 4 iterations in one job on `world` ranks (*full)
  // and of 2 iterations, a stop and a resume on `resume_world` ranks for 2
  // more (*cut), with checkpoints every 2. The runs stay in dir_/full and
  // dir_/cut. `offload_cut`: the cut run's offload fields (WriteConfig).
  void RunWholeAndResumed(int world, int resume_world, int rollout_tp,
                          bool grpo, bool by_layer,
                          std::vector<std::vector<double>>* full,
                          std::vector<std::vector<double>>* cut,
                          const std::string& offload_cut = "") {
    const std::string full_root = (dir_ / "full").string();
    const std::string cut_root = (dir_ / "cut").string();
    const std::string full_cfg =
        WriteConfig("full.yaml", 4, rollout_tp, full_root, grpo, by_layer);
    const std::string cut_cfg = WriteConfig("cut.yaml", 4, rollout_tp, cut_root,
                                            grpo, by_layer, offload_cut);
    const std::string full_out = (dir_ / "full_report").string();
    const std::string cut_out = (dir_ / "cut_report").string();
    ASSERT_TRUE(RunJob(world, {"run", full_cfg, full_out}));
    ASSERT_TRUE(RunJob(world, {"run", cut_cfg, cut_out, "--max", "2"}));
    ASSERT_TRUE(RunJob(resume_world, {"run", cut_cfg, cut_out, "--resume"}));
    *full = ReadReports(full_out + ".0");
    *cut = ReadReports(cut_out + ".0");
    ASSERT_EQ(full->size(), 4u);
    ASSERT_EQ(cut->size(), 4u);
  }

  // On 2 ranks, the resumed run equals the uninterrupted one bit for bit.
  void ExpectResumeIsBitForBit(bool grpo, bool by_layer,
                               const std::string& offload_cut = "") {
    std::vector<std::vector<double>> full, cut;
    RunWholeAndResumed(2, 2, 2, grpo, by_layer, &full, &cut, offload_cut);
    if (HasFatalFailure()) return;
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(full[i], cut[i]) << "iteration " << i;
    }
  }

  fs::path dir_;
};

TEST_F(TrainerDistTest, FsdpStepEqualsUnshardedStep) {
  const std::string one = (dir_ / "w1").string();
  ASSERT_TRUE(RunJob(1, {"fsdp_step", one}));
  const std::vector<float> a = ReadFloats(one);
  ASSERT_FALSE(a.empty());
  for (int world : {2, 3}) {
    const std::string path = (dir_ / ("w" + std::to_string(world))).string();
    ASSERT_TRUE(RunJob(world, {"fsdp_step", path}));
    std::vector<float> b = ReadFloats(path);
    ASSERT_GE(b.size(), a.size() - 2);  // Padding differs with the world.
    double max_diff = 0, max_abs = 0, moved = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      max_diff = std::max(max_diff, std::fabs(double{a[i]} - b[i]));
      max_abs = std::max(max_abs, std::fabs(double{a[i]}));
    }
    (void)moved;
    EXPECT_LE(max_diff, 1e-6 * max_abs) << "world " << world;
  }
}

// FSDP a decoder layer at a time (gathered before use, recomputed and
// reduced in backward) gives bit for bit the step of FSDP over the whole
// flat buffer: on 2 ranks, and on 3 ranks with only 2 rows so that one
// rank has none and takes part through Idle. 3 layers over 3 ranks: units
// straddle the pieces' borders. Tied or not: a tied matrix's looked-up
// rows keep their head gradient until the lookup's is added.
TEST_F(TrainerDistTest, FsdpByLayerIsBitIdenticalToWhole) {
  for (auto [world, rows, tied] :
       {std::tuple{2, 6, false}, std::tuple{3, 2, false},
        std::tuple{2, 6, true}, std::tuple{3, 2, true}}) {
    const std::string shape = tied ? "tied" : "plain";
    const std::string tag =
        std::to_string(world) + "_" + std::to_string(rows) + shape;
    const std::string whole = (dir_ / ("whole" + tag)).string();
    const std::string layer = (dir_ / ("layer" + tag)).string();
    ASSERT_TRUE(RunJob(
        world, {"fsdp_step", whole, "whole", std::to_string(rows), shape}));
    ASSERT_TRUE(RunJob(
        world, {"fsdp_step", layer, "layer", std::to_string(rows), shape}));
    const std::vector<float> a = ReadFloats(whole);
    const std::vector<float> b = ReadFloats(layer);
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
        << "world " << world << ", rows " << rows << ", " << shape;
    // And the step moved the parameters (the comparison is not vacuous).
    const std::string before = (dir_ / ("none" + tag)).string();
    ASSERT_TRUE(RunJob(world, {"fsdp_step", before, "whole", "0", shape}));
    const std::vector<float> c = ReadFloats(before);
    ASSERT_EQ(c.size(), a.size());
    EXPECT_NE(std::memcmp(a.data(), c.data(), a.size() * 4), 0);
  }
}

// The same with a model whose embedding and head are most of it, in chunks
// of 64 rows: on 3 ranks some chunks straddle two ranks' pieces, and the
// looked-up rows are runs scattered over every piece, gathered through
// per-rank messages; a chunk in one piece or on 2 ranks is received in
// place. Every way gives the whole step's bits.
TEST_F(TrainerDistTest, FsdpByLayerWithAWideRootUnitIsBitIdenticalToWhole) {
  for (int world : {2, 3}) {
    const std::string tag = std::to_string(world);
    const std::string whole = (dir_ / ("wide_whole" + tag)).string();
    const std::string layer = (dir_ / ("wide_layer" + tag)).string();
    ASSERT_TRUE(RunJob(world, {"fsdp_step", whole, "whole", "6", "wide"}));
    ASSERT_TRUE(RunJob(world, {"fsdp_step", layer, "layer", "6", "wide"}));
    const std::vector<float> a = ReadFloats(whole);
    const std::vector<float> b = ReadFloats(layer);
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
        << "world " << world;
  }
}

// The GPU's way of exchanging FSDP units (Comm::equal_size_collectives:
// streams padded to equal size, one all-gather; gradient windows padded,
// one reduce-scatter), run here on the CPU over Gloo, gives the bits of the
// host's way, by layer and whole, tied or not, with a rank that has no rows
// and with a root unit spread over several pieces.
TEST_F(TrainerDistTest, EqualSizeCollectivesGiveTheSameStep) {
  for (auto [world, rows, shape, mode] :
       {std::tuple{2, 6, "plain", "layer"}, std::tuple{3, 2, "tied", "layer"},
        std::tuple{3, 6, "wide", "layer"}, std::tuple{3, 6, "wide", "whole"}}) {
    const std::string tag =
        std::to_string(world) + "_" + std::to_string(rows) + shape + mode;
    const std::string host = (dir_ / ("host" + tag)).string();
    const std::string equal = (dir_ / ("equal" + tag)).string();
    ASSERT_TRUE(
        RunJob(world, {"fsdp_step", host, mode, std::to_string(rows), shape}));
    ASSERT_TRUE(RunJob(world, {"fsdp_step", equal, mode, std::to_string(rows),
                               shape, "equal"}));
    const std::vector<float> a = ReadFloats(host);
    const std::vector<float> b = ReadFloats(equal);
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << tag;
  }
}

// The same step with the model, its gradients and Adam state on a GPU
// (FSDP over NCCL, one rank per GPU, up to 2) equals the CPU's within
// float rounding (cuBLAS and NCCL sum in their own orders). Skips without
// a GPU; a LibTorch without CUDA fails the job with a configuration error.
TEST_F(TrainerDistTest, FsdpStepOnCudaMatchesTheCpu) {
  if (hy::GpuDeviceCount() == 0) GTEST_SKIP() << "needs a CUDA device";
  const int world = std::min(2, hy::GpuDeviceCount());
  for (const char* mode : {"whole", "layer"}) {
    const std::string cpu = (dir_ / (std::string("cpu") + mode)).string();
    const std::string gpu = (dir_ / (std::string("gpu") + mode)).string();
    ASSERT_TRUE(RunJob(world, {"fsdp_step", cpu, mode, "6", "tied"}));
    ASSERT_TRUE(RunJob(world, {"fsdp_step", gpu, mode, "6", "tied", "cuda"}));
    const std::vector<float> a = ReadFloats(cpu);
    const std::vector<float> b = ReadFloats(gpu);
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(a.size(), b.size());
    double max_diff = 0, max_abs = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(double{a[i]} - b[i]));
      max_abs = std::max(max_abs, std::fabs(double{a[i]}));
    }
    EXPECT_LE(max_diff, 1e-5 * max_abs) << mode;
  }
}

TEST_F(TrainerDistTest, TpForwardEqualsWholeForward) {
  EXPECT_TRUE(RunJob(2, {"tp_forward"}));
}

TEST_F(TrainerDistTest, ShortRunRaisesReward) {
  // 60 iterations from a near-random policy (12 SFT steps): with seed 11
  // the mean reward of the last 10 iterations clearly exceeds the first
  // 10's (0.030 -> 0.144 with OpenBLAS, scripts/install-deps.sh; the curve
  // is noisy, 30 iterations were too few to be sure of it). CPU kernels run
  // on one thread per rank and every reduction has a fixed order, so the
  // figures are the same on every run of the same build and BLAS.
  const std::string root = (dir_ / "store").string();
  const int n = 60;
  const std::string cfg = WriteConfig("c.yaml", n, 2, root);
  const std::string out = (dir_ / "report").string();
  ASSERT_TRUE(RunJob(2, {"run", cfg, out}));
  const auto r0 = ReadReports(out + ".0");
  const auto r1 = ReadReports(out + ".1");
  ASSERT_EQ(r0.size(), static_cast<size_t>(n));
  EXPECT_EQ(r0, r1) << "ranks must report the same figures";
  for (int i = 0; i < n; ++i) std::printf("%.3f ", r0[i][1]);
  std::printf("\n");
  double first = 0, last = 0;
  for (int i = 0; i < 10; ++i) {
    first += r0[i][1] / 10;
    last += r0[n - 10 + i][1] / 10;
  }
  std::printf("reward: first ten %.4f, last ten %.4f\n", first, last);
  EXPECT_GT(last, first + 0.05);
}

// The cut run keeps the actor's and the critic's Adam moments offloaded
// (trainer.offload_optimizer: in a file, each chunk's pages handed back
// as the optimizer steps and as the checkpoint reads them, read back from
// the file by the resume) and still matches.
TEST_F(TrainerDistTest, ResumeSameWorldSizeIsBitForBit) {
  ExpectResumeIsBitForBit(false, false, ", offload_optimizer: true");
}

// GRPO needs no value model: the run creates no critic (its checkpoints
// hold actor and reference only), trains by layer, and a resumed run
// continues it bit for bit, as a GAE run does; the cut run keeps its
// reference, rollout weights and moments offloaded
// (trainer.offload_reference, trainer.offload_rollout,
// trainer.offload_optimizer: in files, their pages handed back each
// iteration and read back, the rollout weights' through the sparse delta
// sync) and still matches.
TEST_F(TrainerDistTest, GrpoRunsWithoutACriticAndResumesBitForBit) {
  ExpectResumeIsBitForBit(true, true,
                          ", offload_reference: true, offload_rollout: true, "
                          "offload_optimizer: true");
  if (HasFatalFailure()) return;
  const std::string full_root = (dir_ / "full").string();
  hy::statestore::StoreOptions options;
  options.create_if_missing = false;
  auto store =
      hy::statestore::Store::Open(full_root + "/node-0/store", options);
  ASSERT_TRUE(store.ok()) << store.status();
  auto latest = (*store)->LatestCommitted();
  ASSERT_TRUE(latest.ok()) << latest.status();
  auto manifest = (*store)->ReadManifest(*latest);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  int actor = 0, ref = 0, critic = 0;
  for (const auto& [name, entry] : manifest->tensors) {
    actor += name.rfind("actor/", 0) == 0;
    ref += name.rfind("reference/", 0) == 0;
    critic += name.rfind("critic/", 0) == 0;
  }
  EXPECT_GT(actor, 0);
  EXPECT_GT(ref, 0);
  EXPECT_EQ(critic, 0);
}

TEST_F(TrainerDistTest, ResumeOnFewerRanksStaysWithinTolerance) {
  std::vector<std::vector<double>> full, cut;
  RunWholeAndResumed(4, 3, 1, false, false, &full, &cut);
  if (HasFatalFailure()) return;
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(full[i], cut[i]);
  // Columns: 1 reward, 3 kl, 5 policy loss, 7 entropy.
  for (size_t i = 2; i < 4; ++i) {
    std::printf(
        "iter %zu: reward %.6f vs %.6f, kl %.3e vs %.3e, entropy "
        "%.6f vs %.6f\n",
        i, full[i][1], cut[i][1], full[i][3], cut[i][3], full[i][7], cut[i][7]);
    EXPECT_NEAR(full[i][1], cut[i][1], 0.02) << "reward, iteration " << i;
    EXPECT_NEAR(full[i][7], cut[i][7], 1e-3) << "entropy, iteration " << i;
    EXPECT_NEAR(full[i][3], cut[i][3], 1e-3) << "kl, iteration " << i;
  }
}

}  // namespace
