// The run root the hyctl run-root tests read: two ranks (one thread each,
// each with its own node directory and store; no LibTorch) save their flat
// halves of a small state with checkpoint::Checkpointer, as the processes
// of a run would. Shared by hyctl_restore_test.cc (restore, inspect) and
// hyctl_run_root_test.cc (verify, export, diff, gc, import, drop on a run
// root).

#ifndef HY_TESTS_CLI_RUN_ROOT_FIXTURE_H_
#define HY_TESTS_CLI_RUN_ROOT_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "hy/checkpoint/checkpoint.h"
#include "hy/statestore/safetensors.h"
#include "statestore/store_test_util.h"

namespace hy::cli::testing {

using statestore::SafetensorsReader;
using statestore::ShardData;
using statestore::testing::TempDir;

inline constexpr uint64_t kStep = 4;
inline constexpr int kOldWorld = 2;

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
inline FlatRun Piece(int64_t n, int world, int r) {
  return {n * r / world, n * (r + 1) / world - n * r / world};
}

// Ranks 0 and 1 each save their flat half of both tensors at `step` from a
// thread of their own, as the processes of a run would.
inline void SaveRun(const std::string& root, const State& s,
                    uint64_t step = kStep, const std::string& run_id = "") {
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
inline std::string Slice(const std::vector<T>& v, FlatRun run) {
  return std::string(reinterpret_cast<const char*>(v.data() + run.offset),
                     run.length * sizeof(T));
}

inline std::string Data(const SafetensorsReader& f, const std::string& name) {
  auto d = f.TensorData(name);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::string(d->AsStringView()) : std::string();
}

// Each test starts from a run root (root_) holding step kStep of state_.
class RunRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.Sub("run");
    SaveRun(root_, state_);
  }

  TempDir dir_;
  std::string root_;
  State state_;
};

}  // namespace hy::cli::testing

#endif  // HY_TESTS_CLI_RUN_ROOT_FIXTURE_H_
