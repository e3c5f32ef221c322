// hyctl restore and the run-root forms of hyctl inspect, verify, gc, export
// and diff, run as a subprocess
// on a run root that checkpoint::Checkpointer wrote (two ranks, one thread
// each, each with its own node directory and store; no LibTorch).

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hy/checkpoint/checkpoint.h"
#include "hy/common/bf16.h"
#include "hy/recovery/node_identity.h"
#include "hy/statestore/safetensors.h"
#include "statestore/store_test_util.h"

namespace hy::cli {
namespace {

using statestore::SafetensorsReader;
using statestore::ShardData;
using statestore::testing::TempDir;

struct CmdResult {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

CmdResult Hyctl(const TempDir& dir, const std::string& args) {
  CmdResult r;
  const std::string err_path = dir.Sub("stderr.txt");
  FILE* p = popen(
      (std::string(HYCTL_PATH) + " " + args + " 2>" + err_path).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream ss;
  ss << err.rdbuf();
  r.err = ss.str();
  return r;
}

constexpr uint64_t kStep = 4;
constexpr int kOldWorld = 2;

// The state at kStep: "w" f32 [5, 7] and "b" bf16 [11] (raw bits).
struct State {
  std::vector<float> w = std::vector<float>(5 * 7);
  std::vector<uint16_t> b = std::vector<uint16_t>(11);
  State() {
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * i + 1.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = uint16_t(100 + 3 * i);
  }
};

// Rank r's contiguous piece of n elements in a world of `world`.
FlatRun Piece(int64_t n, int world, int r) {
  return {n * r / world, n * (r + 1) / world - n * r / world};
}

// Ranks 0 and 1 each save their flat half of both tensors at `step` from a
// thread of their own, as the processes of a run would.
void SaveRun(const std::string& root, const State& s, uint64_t step = kStep,
             const std::string& run_id = "") {
  std::vector<std::thread> threads;
  for (int r = 0; r < kOldWorld; ++r) {
    threads.emplace_back([&, r] {
      checkpoint::CheckpointOptions o;
      o.root = root;
      o.rank = r;
      o.world_size = kOldWorld;
      o.commit_timeout_ms = 10000;
      o.chunk_bytes = 64;  // Several chunks per shard.
      o.run_id = run_id;
      auto ckpt = checkpoint::Checkpointer::Open(o);
      ASSERT_TRUE(ckpt.ok()) << ckpt.status();
      const FlatRun w = Piece(s.w.size(), kOldWorld, r);
      const FlatRun b = Piece(s.b.size(), kOldWorld, r);
      std::vector<ShardData> shards;
      shards.push_back({TensorMeta{"w", DType::kF32, {5, 7}},
                        ShardGeometry::FromRuns({w}),
                        ConstBytes(s.w.data() + w.offset, w.length * 4)});
      shards.push_back({TensorMeta{"b", DType::kBF16, {11}},
                        ShardGeometry::FromRuns({b}),
                        ConstBytes(s.b.data() + b.offset, b.length * 2)});
      ASSERT_TRUE(
          (*ckpt)->Save(step, std::move(shards), {}, "fsdp=2", "rules").ok());
      Status st = (*ckpt)->Wait();
      EXPECT_TRUE(st.ok()) << "rank " << r << ": " << st;
    });
  }
  for (std::thread& t : threads) t.join();
}

// Elements `run` of `v`, as bytes.
template <typename T>
std::string Slice(const std::vector<T>& v, FlatRun run) {
  return std::string(reinterpret_cast<const char*>(v.data() + run.offset),
                     run.length * sizeof(T));
}

std::string Data(const SafetensorsReader& f, const std::string& name) {
  auto d = f.TensorData(name);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::string(d->AsStringView()) : std::string();
}

class HyctlRestoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.Sub("run");
    SaveRun(root_, state_);
  }

  TempDir dir_;
  std::string root_;
  State state_;
};

TEST_F(HyctlRestoreTest, RestoresAnFsdpShardForANewWorldSize) {
  const std::string out = dir_.Sub("out");
  CmdResult r = Hyctl(
      dir_, "restore " + root_ + " --layout fsdp=3 --rank 1 --out " + out);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("restored step 4"), std::string::npos) << r.out;

  auto file = SafetensorsReader::Open(out + "/rank-1.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  const SafetensorsReader& f = **file;
  ASSERT_EQ(f.tensors().size(), 2u);
  // Rank 1 of 3: elements [numel / 3, 2 * numel / 3) of each tensor.
  const FlatRun w = Piece(35, 3, 1), b = Piece(11, 3, 1);
  EXPECT_EQ(w.offset, 11);
  EXPECT_EQ(w.length, 12);
  EXPECT_EQ(b.offset, 3);
  EXPECT_EQ(b.length, 4);
  ASSERT_NE(f.Find("w"), nullptr);
  ASSERT_NE(f.Find("b"), nullptr);
  EXPECT_EQ(f.Find("w")->meta, (TensorMeta{"w", DType::kF32, {w.length}}));
  EXPECT_EQ(f.Find("b")->meta, (TensorMeta{"b", DType::kBF16, {b.length}}));
  EXPECT_EQ(Data(f, "w"), Slice(state_.w, w));
  EXPECT_EQ(Data(f, "b"), Slice(state_.b, b));
  EXPECT_EQ(f.metadata().at("step"), "4");
  EXPECT_EQ(f.metadata().at("layout"), "fsdp=3");
  EXPECT_EQ(f.metadata().at("rank"), "1");
  EXPECT_EQ(f.metadata().at("source_world_size"), "2");
  EXPECT_EQ(f.metadata().at("source_layout"), "fsdp=2");

  // The three ranks' pieces together are the whole tensors.
  std::string w_all, b_all;
  for (int rank = 0; rank < 3; ++rank) {
    r = Hyctl(dir_, "restore " + root_ +
                        " --version 4 --layout fsdp=3 "
                        "--rank " +
                        std::to_string(rank) + " --out " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    auto g = SafetensorsReader::Open(out + "/rank-" + std::to_string(rank) +
                                     ".safetensors");
    ASSERT_TRUE(g.ok()) << g.status();
    w_all += Data(**g, "w");
    b_all += Data(**g, "b");
  }
  EXPECT_EQ(w_all, Slice(state_.w, {0, 35}));
  EXPECT_EQ(b_all, Slice(state_.b, {0, 11}));
}

TEST_F(HyctlRestoreTest, RestoresWholeTensorsWhenReplicated) {
  const std::string out = dir_.Sub("out");
  CmdResult r = Hyctl(
      dir_, "restore " + root_ + " --layout replicated --rank 0 --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  auto file = SafetensorsReader::Open(out + "/rank-0.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Find("w")->meta, (TensorMeta{"w", DType::kF32, {5, 7}}));
  EXPECT_EQ((*file)->Find("b")->meta, (TensorMeta{"b", DType::kBF16, {11}}));
  EXPECT_EQ(Data(**file, "w"), Slice(state_.w, {0, 35}));
  EXPECT_EQ(Data(**file, "b"), Slice(state_.b, {0, 11}));
  EXPECT_EQ((*file)->metadata().at("layout"), "replicated");
}

TEST_F(HyctlRestoreTest, RejectsBadArgumentsClearly) {
  const std::string out = dir_.Sub("out");
  CmdResult r = Hyctl(
      dir_, "restore " + root_ + " --layout fsdp=3 --rank 3 --out " + out);
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("--rank 3 is outside layout fsdp=3"), std::string::npos)
      << r.err;
  // A TP layout needs the split rules the step records; these are not
  // YAML.
  r = Hyctl(dir_, "restore " + root_ + " --layout tp=2 --rank 0 --out " + out);
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("recorded split rules do not parse"), std::string::npos)
      << r.err;
  r = Hyctl(dir_, "restore " + root_ + " --layout tp=2 --rank 2 --out " + out);
  EXPECT_EQ(r.code, 64);
  EXPECT_NE(r.err.find("outside layout tp=2"), std::string::npos) << r.err;
  r = Hyctl(dir_,
            "restore " + root_ + " --layout fsdp=x --rank 0 --out " + out);
  EXPECT_EQ(r.code, 64);
  r = Hyctl(dir_, "restore " + root_ +
                      " --version 9 --layout fsdp=2 --rank 0 --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("step 9 is not committed"), std::string::npos) << r.err;
  r = Hyctl(dir_, "restore " + dir_.Sub("nothing") +
                      " --layout fsdp=2 --rank 0 --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(std::filesystem::exists(out + "/rank-0.safetensors"));
}

TEST_F(HyctlRestoreTest, InspectShowsCopiesAndRecoverability) {
  CmdResult r = Hyctl(dir_, "inspect " + root_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("primary on node 0 (committed)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("primary on node 1 (committed)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("recoverable: step 4"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("not recoverable"), std::string::npos) << r.out;

  // Both nodes' directories say they are on one host: inspect says what
  // replicas then protect against. On two hosts it lists them.
  hy::recovery::NodeReport host;
  host.key = "host:h1";
  host.hostname = "h1";
  ASSERT_TRUE(hy::recovery::RecordHost(root_, 0, host).ok());
  ASSERT_TRUE(hy::recovery::RecordHost(root_, 1, host).ok());
  r = Hyctl(dir_, "inspect " + root_);
  EXPECT_NE(r.out.find("(hosts: 0 h1, 1 h1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every node is on host h1: replicas guard against a "
                       "lost process or disk there"),
            std::string::npos)
      << r.out;
  host.key = "host:h2";
  host.hostname = "h2";
  ASSERT_TRUE(hy::recovery::RecordHost(root_, 1, host).ok());
  r = Hyctl(dir_, "inspect " + root_);
  EXPECT_NE(r.out.find("(hosts: 0 h1, 1 h2)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("every node is on host"), std::string::npos) << r.out;

  r = Hyctl(dir_, "inspect " + root_ + " -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["nodes"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(j["hosts"]["1"], "h2");
  EXPECT_EQ(j["single_host"], false);
  EXPECT_EQ(j["recoverable"], true);
  EXPECT_EQ(j["recover_step"], kStep);
  ASSERT_EQ(j["versions"].size(), 1u);
  const auto& v = j["versions"][0];
  EXPECT_EQ(v["step"], kStep);
  EXPECT_EQ(v["world_size"], kOldWorld);
  EXPECT_EQ(v["recoverable"], true);
  ASSERT_EQ(v["ranks"].size(), 2u);
  for (int rank = 0; rank < kOldWorld; ++rank) {
    const auto& copies = v["ranks"][rank]["copies"];
    ASSERT_EQ(copies.size(), 1u) << v.dump();
    EXPECT_EQ(copies[0]["node"], rank);
    EXPECT_EQ(copies[0]["replica"], false);
    EXPECT_EQ(copies[0]["state"], "committed");
  }

  // --step picks a step of the run.
  r = Hyctl(dir_, "inspect " + root_ + " --step 4 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["versions"].size(), 1u);
  EXPECT_EQ(Hyctl(dir_, "inspect " + root_ + " --step 9").code, 2);

  // A single store still inspects as before.
  r = Hyctl(dir_, "inspect " + root_ + "/node-0/store -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto versions = nlohmann::json::parse(r.out);
  ASSERT_EQ(versions.size(), 1u);
  EXPECT_EQ(versions[0]["step"], kStep);
  EXPECT_EQ(versions[0]["committed"], true);

  // Node 1 is lost: rank 1's part has no copy left.
  std::filesystem::remove_all(root_ + "/node-1");
  r = Hyctl(dir_, "inspect " + root_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("not recoverable"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("none"), std::string::npos) << r.out;
  r = Hyctl(dir_, "inspect " + root_ + " -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["nodes"], nlohmann::json::array({0}));
  EXPECT_EQ(j["recoverable"], false);
  ASSERT_EQ(j["versions"].size(), 1u);
  EXPECT_EQ(j["versions"][0]["recoverable"], false);
  EXPECT_EQ(j["versions"][0]["ranks"][1]["copies"].size(), 0u);

  const std::string out = dir_.Sub("out");
  r = Hyctl(dir_,
            "restore " + root_ + " --layout fsdp=3 --rank 1 --out " + out);
  EXPECT_EQ(r.code, 3) << r.out;  // DataLoss.
  EXPECT_NE(r.err.find("old rank(s) 1"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out + "/rank-1.safetensors"));
}

// On a run root and on one rank's store of it, inspect, verify and export
// take the step, not the internal version id (step << 16 | generation).
TEST_F(HyctlRestoreTest, RunRootCommandsTakeSteps) {
  CmdResult r = Hyctl(dir_, "verify " + root_ + " --step 4 -o json");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  nlohmann::json v = nlohmann::json::parse(r.out);
  ASSERT_EQ(v.size(), 2u) << r.out;
  EXPECT_EQ(v[0]["versions"][0]["step"], 4) << r.out;
  EXPECT_EQ(v[0]["versions"][0]["version"], 4 << 16) << r.out;
  r = Hyctl(dir_, "verify " + root_ + "@4");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = Hyctl(dir_, "verify " + root_ + " --step 9");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("step 9"), std::string::npos) << r.err;

  const std::string store = root_ + "/node-0/store";
  r = Hyctl(dir_, "inspect " + store + " --step 4 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["version"], 4 << 16);
  r = Hyctl(dir_, "inspect " + store);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find(std::to_string(4 << 16)), std::string::npos) << r.out;
  r = Hyctl(dir_, "inspect " + store + " --step " + std::to_string(4 << 16));
  EXPECT_EQ(r.code, 2) << r.out << r.err;

  const std::string file = dir_.Sub("at4.safetensors");
  r = Hyctl(dir_, "export " + root_ + "@4 --safetensors " + file);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("step 4"), std::string::npos) << r.out;
  r = Hyctl(dir_, "export " + root_ + " --step 9 --safetensors " + file + "9");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("9"), std::string::npos) << r.err;
  // A run root's versions differ from store to store: no --version-id.
  r = Hyctl(dir_, "export " + root_ + " --version-id " +
                      std::to_string(4 << 16) + " --safetensors " + file);
  EXPECT_EQ(r.code, 64) << r.out << r.err;
  EXPECT_NE(r.err.find("--step"), std::string::npos) << r.err;
}

// diff compares values across dtypes (bf16 widened), within --atol /
// --rtol, counts every tensor of A or B once, and exits 1 when some differ.
TEST_F(HyctlRestoreTest, DiffComparesValuesAcrossDtypes) {
  // The state at step 4 with the dtypes swapped: w as bf16 (its values,
  // multiples of 0.5 up to 18, are exact in bf16), b as f32.
  auto write = [&](const std::string& name, float w3, bool extra) {
    std::vector<uint16_t> w(state_.w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] = FloatToBf16Bits(i == 3 ? w3 : state_.w[i]);
    }
    std::vector<float> b(state_.b.size());
    for (size_t i = 0; i < b.size(); ++i) b[i] = Bf16BitsToFloat(state_.b[i]);
    std::vector<std::pair<TensorMeta, ConstBytes>> tensors = {
        {TensorMeta{"w", DType::kBF16, {5, 7}},
         ConstBytes(w.data(), w.size() * 2)},
        {TensorMeta{extra ? "extra" : "b", DType::kF32, {11}},
         ConstBytes(b.data(), b.size() * 4)}};
    const std::string file = dir_.Sub(name + ".safetensors");
    EXPECT_TRUE(statestore::WriteSafetensors(file, tensors, {}).ok());
    CmdResult r = Hyctl(dir_, "import " + dir_.Sub(name) + " --step 4 " +
                                  "--safetensors " + file);
    EXPECT_EQ(r.code, 0) << r.err;
    return dir_.Sub(name);
  };
  const std::string same = write("same", state_.w[3], false);
  CmdResult r = Hyctl(dir_, "diff " + same + " " + root_ + "@4");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("0 of 2 tensors differ"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 compared by value across dtypes"), std::string::npos)
      << r.out;

  // w[3] is 2.5 at step 4; 2.75 here.
  const std::string off = write("off", state_.w[3] + 0.25f, false);
  r = Hyctl(dir_, "diff -o json " + off + "@4 " + root_);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  nlohmann::json d = nlohmann::json::parse(r.out);
  EXPECT_EQ(d["tensors_differing"], 1);
  EXPECT_EQ(d["elements_differing"], 1);
  ASSERT_EQ(d["tensors"].size(), 1u);
  EXPECT_EQ(d["tensors"][0]["name"], "w");
  EXPECT_DOUBLE_EQ(d["tensors"][0]["max_abs_diff"].get<double>(), 0.25);
  EXPECT_EQ(Hyctl(dir_, "diff --atol 0.25 " + off + " " + root_).code, 0);
  EXPECT_EQ(Hyctl(dir_, "diff --atol 0.2 " + off + " " + root_).code, 1);
  // |2.75 - 2.5| <= 0.1 * 2.5.
  EXPECT_EQ(Hyctl(dir_, "diff --rtol 0.1 " + off + " " + root_).code, 0);
  EXPECT_EQ(Hyctl(dir_, "diff --rtol 0.05 " + off + " " + root_).code, 1);
  EXPECT_EQ(Hyctl(dir_, "diff --atol -1 " + off + " " + root_).code, 64);

  // b only in A, extra only in B: 2 of the 3 tensors differ.
  const std::string extra = write("extra", state_.w[3], true);
  r = Hyctl(dir_, "diff " + root_ + " " + extra);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("2 of 3 tensors differ"), std::string::npos) << r.out;
}

// verify, export, diff and gc take the run root hyctl train writes, not
// only a single store.
TEST_F(HyctlRestoreTest, VerifyExportDiffGcTakeARunRoot) {
  CmdResult r = Hyctl(dir_, "verify " + root_);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("node-0/store: 1 versions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("node-1/store: 1 versions"), std::string::npos) << r.out;

  // Export assembles whole tensors from both ranks' stores.
  const std::string file = dir_.Sub("all.safetensors");
  r = Hyctl(dir_, "export " + root_ + " --safetensors " + file);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("step 4"), std::string::npos) << r.out;
  auto f = SafetensorsReader::Open(file);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Data(**f, "w"), Slice(state_.w, {0, 35}));
  EXPECT_EQ(Data(**f, "b"), Slice(state_.b, {0, 11}));

  // Step 5: two elements of w changed, one on each rank.
  State next = state_;
  next.w[3] += 1.0f;
  next.w[20] -= 0.25f;
  SaveRun(root_, next, 5);
  r = Hyctl(dir_, "diff -o json " + root_ + "@4 " + root_ + "@5");
  ASSERT_EQ(r.code, 1) << r.out << r.err;  // They differ.
  nlohmann::json d = nlohmann::json::parse(r.out);
  EXPECT_EQ(d["tensors_compared"], 2);
  EXPECT_EQ(d["tensors_differing"], 1);
  EXPECT_EQ(d["elements_differing"], 2);
  ASSERT_EQ(d["tensors"].size(), 1u);
  EXPECT_EQ(d["tensors"][0]["name"], "w");
  EXPECT_DOUBLE_EQ(d["tensors"][0]["max_abs_diff"].get<double>(), 1.0);
  // Without @N the newest step: the same state.
  r = Hyctl(dir_, "diff " + root_ + " " + root_ + "@5");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("0 of 2 tensors differ"), std::string::npos) << r.out;
  // A store against a run root: a tensor only on one side.
  const std::string one = dir_.Sub("one");
  r = Hyctl(dir_, "import " + one + " --safetensors " + file);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  r = Hyctl(dir_, "diff -o json " + one + " " + root_ + "@4");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["tensors_differing"], 0) << r.out;
  r = Hyctl(dir_, "diff " + one + "@9 " + root_);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find(one), std::string::npos) << r.err;

  // gc of the run root: every store keeps the newest version only.
  r = Hyctl(dir_, "gc " + root_ + " --keep 1");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("node-1/store: dropped 1 versions"), std::string::npos)
      << r.out;
  r = Hyctl(dir_, "verify -o json " + root_);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  nlohmann::json v = nlohmann::json::parse(r.out);
  ASSERT_EQ(v.size(), 2u) << r.out;
  for (const auto& store : v) EXPECT_EQ(store["versions"].size(), 1u) << r.out;
}

// A root made of node-0 of one run and node-1 of another (a node directory
// copied from the wrong run) is refused by every command that reads it,
// naming both run ids, and nothing is written; restore, export and
// export-hf read it anyway with --allow-other-run.
TEST_F(HyctlRestoreTest, RefusesARootOfTwoRuns) {
  namespace fs = std::filesystem;
  const std::string a = dir_.Sub("a"), b = dir_.Sub("b");
  const std::string mixed = dir_.Sub("mixed");
  SaveRun(a, state_, kStep, "run-a");
  State other = state_;
  for (float& x : other.w) x += 2.0f;
  SaveRun(b, other, kStep, "run-b");
  fs::create_directories(mixed);
  fs::copy(a + "/node-0", mixed + "/node-0", fs::copy_options::recursive);
  fs::copy(b + "/node-1", mixed + "/node-1", fs::copy_options::recursive);

  const std::string out = dir_.Sub("out");
  const std::vector<std::string> commands = {
      "inspect " + mixed,
      "inspect --quick " + mixed,
      "verify " + mixed,
      "gc " + mixed + " --keep 1",
      "repair " + mixed,
      "restore " + mixed + " --layout replicated --rank 0 --out " + out,
      "export " + mixed + " --safetensors " + out + "/all.safetensors",
      "export-hf " + mixed + " " + out + "/hf",
      "diff " + mixed + " " + a,
  };
  for (const std::string& c : commands) {
    SCOPED_TRACE(c);
    CmdResult r = Hyctl(dir_, c);
    EXPECT_NE(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.err.find("stores of two runs"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("'run-a'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("'run-b'"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << r.out;
  }
  // gc dropped nothing; each half is its own run's state at step 4.
  CmdResult r = Hyctl(dir_, "restore " + mixed +
                                " --allow-other-run --layout replicated "
                                "--rank 0 --out " +
                                out);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  auto file = SafetensorsReader::Open(out + "/rank-0.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  const FlatRun second = Piece(35, kOldWorld, 1);
  EXPECT_EQ(Data(**file, "w"),
            Slice(state_.w, Piece(35, kOldWorld, 0)) + Slice(other.w, second));
  r = Hyctl(dir_, "export --allow-other-run " + mixed + " --safetensors " +
                      out + "/all.safetensors");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  // Each run alone is fine.
  r = Hyctl(dir_, "verify " + a);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = Hyctl(dir_, "inspect " + b);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

// A run's stores take no import (its newest step would become the
// imported version and break the resume): exit 64, nothing written.
TEST_F(HyctlRestoreTest, ImportIntoARunsStoreIsRefused) {
  namespace fs = std::filesystem;
  const std::string file = dir_.Sub("all.safetensors");
  CmdResult r = Hyctl(dir_, "export " + root_ + " --safetensors " + file);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const std::string& target :
       {root_ + "/node-0/store", root_ + "/node-1/store/", root_,
        root_ + "/node-0/new-store"}) {
    SCOPED_TRACE(target);
    r = Hyctl(dir_, "import " + target + " --safetensors " + file);
    EXPECT_EQ(r.code, 64) << r.out << r.err;
    EXPECT_NE(r.err.find("import into a fresh store instead"),
              std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(fs::exists(root_ + "/node-0/new-store"));
  EXPECT_FALSE(fs::exists(root_ + "/CURRENT"));
  // A store that records a run id, copied out of its run root.
  const std::string tagged = dir_.Sub("tagged");
  SaveRun(tagged, state_, kStep, "run-t");
  const std::string copy = dir_.Sub("copy");
  fs::copy(tagged + "/node-0/store", copy, fs::copy_options::recursive);
  r = Hyctl(dir_, "import " + copy + " --safetensors " + file);
  EXPECT_EQ(r.code, 64) << r.out << r.err;
  EXPECT_NE(r.err.find("belongs to run 'run-t'"), std::string::npos) << r.err;
  r = Hyctl(dir_, "inspect -o json " + copy);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u) << r.out;
  // The run is untouched; a fresh store takes the import.
  r = Hyctl(dir_, "inspect -o json " + root_ + "/node-0/store");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 1u) << r.out;
  r = Hyctl(dir_, "import " + dir_.Sub("fresh") + " --safetensors " + file);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

// hyctl drop removes one step from every copy; the newest recoverable step
// only with --force (exit 64 without); an unknown step exits 2.
TEST_F(HyctlRestoreTest, DropRemovesOneStepFromEveryCopy) {
  State next = state_;
  next.w[3] += 1.0f;
  SaveRun(root_, next, 5);
  SaveRun(root_, state_, 6);  // Checkpointer keeps the newest 2: 5 and 6.
  const std::string out = dir_.Sub("out");
  auto restore = [&](int step) {
    return Hyctl(dir_, "restore " + root_ + " --step " + std::to_string(step) +
                           " --layout replicated --rank 0 --out " + out);
  };
  ASSERT_EQ(restore(5).code, 0);
  CmdResult r = Hyctl(dir_, "drop " + root_ + " --step 6");
  EXPECT_EQ(r.code, 64) << r.out << r.err;
  EXPECT_NE(r.err.find("newest recoverable step"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  EXPECT_EQ(restore(6).code, 0);
  r = Hyctl(dir_, "drop " + root_ + " --step 9");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  r = Hyctl(dir_, "drop " + root_ + "/node-0/store --step 5");
  EXPECT_EQ(r.code, 64) << r.out << r.err;

  r = Hyctl(dir_, "drop " + root_ + " --step 5");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("dropped step(s) 5: 2 version(s)"), std::string::npos)
      << r.out;
  EXPECT_EQ(restore(5).code, 2);
  EXPECT_EQ(restore(6).code, 0);
  r = Hyctl(dir_, "drop " + root_ + " --step 6 --force");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(restore(6).code, 2);
  r = Hyctl(dir_, "inspect -o json " + root_ + "/node-1/store");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 0u) << r.out;
}

// verify of a run root whose one store cannot be opened (its files
// overwritten with garbage) names that store, verifies the others and
// exits 3 at the end.
TEST_F(HyctlRestoreTest, VerifyGoesOnPastAnUnreadableStore) {
  namespace fs = std::filesystem;
  const std::string bad = root_ + "/node-1/store";
  for (const fs::directory_entry& e : fs::directory_iterator(bad)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 4 && (name.rfind("MANIFEST", 0) == 0 ||
                            name.substr(name.size() - 4) == ".sst")) {
      std::ofstream(e.path(), std::ios::trunc) << "garbage";
    }
  }
  CmdResult r = Hyctl(dir_, "verify " + root_);
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("ok: " + root_ + "/node-0/store: 1 versions"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("hyctl verify: " + bad + ": cannot be opened: "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("1 of 2 stores could not be verified"),
            std::string::npos)
      << r.err;
  r = Hyctl(dir_, "verify -o json " + root_);
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  nlohmann::json v = nlohmann::json::parse(r.out);
  ASSERT_EQ(v.size(), 2u) << r.out;
  EXPECT_TRUE(v[0].contains("versions")) << r.out;
  EXPECT_EQ(v[1]["store"], bad) << r.out;
  EXPECT_TRUE(v[1].contains("error")) << r.out;
}

}  // namespace
}  // namespace hy::cli
