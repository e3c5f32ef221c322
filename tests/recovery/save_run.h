// Test helper: a run's ranks (threads over an in-process transport) save
// versions into a run root through checkpoint::Checkpointer, as the trainer
// does, with known values.
#ifndef HY_TESTS_RECOVERY_SAVE_RUN_H_
#define HY_TESTS_RECOVERY_SAVE_RUN_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hy/checkpoint/checkpoint.h"
#include "hy/common/shard.h"
#include "hy/reshard/transport.h"
#include "hy/statestore/store.h"

namespace hy::recovery::testing {

inline constexpr int64_t kNumel = 1000;  // Elements per tensor.
inline const std::vector<std::string> kTensors = {"actor/w", "actor/exp_avg/w"};

inline float Value(uint64_t step, int t, int64_t i) {
  return static_cast<float>(step * 1000003 + t * 7919 + i) * 0.25f;
}

// Rank r's flat shard of `numel` elements over `world` ranks.
inline FlatRun ShardOf(int r, int world, int64_t numel) {
  const int64_t lo = numel * r / world, hi = numel * (r + 1) / world;
  return {lo, hi - lo};
}

inline void RunRanks(int world, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// The `world` ranks of generation `generation` of a run save `steps` with
// one replica each (keep_last 4), through checkpoint::Checkpointer; rank r
// runs on node nodes[r] (empty: node r).
inline void SaveRun(const std::string& root, int world,
                    const std::vector<uint64_t>& steps,
                    const std::vector<int>& nodes = {},
                    uint64_t staging_bytes = 0, uint32_t generation = 0) {
  reshard::InProcessHub hub(world, 30000);
  std::vector<std::unique_ptr<reshard::Transport>> ts;
  for (int r = 0; r < world; ++r) ts.push_back(hub.Connect(r));
  RunRanks(world, [&](int r) {
    checkpoint::CheckpointOptions o;
    o.root = root;
    o.rank = r;
    o.world_size = world;
    o.nodes = nodes;
    o.generation = generation;
    o.staging_bytes = staging_bytes;
    o.chunk_bytes = staging_bytes > 0 ? 1024 : o.chunk_bytes;
    o.keep_last = 4;
    o.replicas = 1;
    o.transport = ts[r].get();
    o.commit_timeout_ms = 20000;
    auto ckpt = checkpoint::Checkpointer::Open(o);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    for (uint64_t step : steps) {
      const FlatRun run = ShardOf(r, world, kNumel);
      std::vector<std::vector<float>> data(kTensors.size());
      std::vector<statestore::ShardData> shards;
      for (size_t t = 0; t < kTensors.size(); ++t) {
        for (int64_t i = 0; i < run.length; ++i) {
          data[t].push_back(Value(step, static_cast<int>(t), run.offset + i));
        }
        statestore::ShardData d;
        d.meta = {kTensors[t], DType::kF32, {kNumel}};
        d.geometry = ShardGeometry::FromRuns({run});
        d.data = ConstBytes(data[t].data(), data[t].size() * 4);
        shards.push_back(std::move(d));
      }
      const std::string blob = "state@" + std::to_string(step);
      std::vector<statestore::BlobData> blobs = {
          {"trainer.state", statestore::kReplicatedBlob, ConstBytes(blob)}};
      ASSERT_TRUE((*ckpt)->Save(step, shards, blobs, "fsdp=4", "rules").ok());
      Status s = (*ckpt)->Wait();
      ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s;
    }
  });
}

}  // namespace hy::recovery::testing

#endif  // HY_TESTS_RECOVERY_SAVE_RUN_H_
