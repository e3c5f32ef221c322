// What the Checkpointer and CheckpointReader tests share: a small training
// state (FSDP flat pieces, TP column blocks, blobs), each rank's part of
// it, ranks as threads, and reading it back under other worlds.

#ifndef HY_TESTS_CHECKPOINT_CHECKPOINT_TEST_UTIL_H_
#define HY_TESTS_CHECKPOINT_CHECKPOINT_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hy/checkpoint/checkpoint.h"
#include "hy/statestore/store.h"

namespace hy::checkpoint {

// The whole training state at one step: "w" and "b" are saved as FSDP flat
// pieces, "tp" as column blocks (boxes).
constexpr int64_t kRows = 24, kCols = 30;
struct State {
  std::vector<float> w = std::vector<float>(40 * 50);
  std::vector<uint16_t> b = std::vector<uint16_t>(999);  // bf16 bits.
  std::vector<float> tp = std::vector<float>(kRows * kCols);
  std::string rng;
};

inline State MakeState(uint64_t step) {
  State s;
  for (size_t i = 0; i < s.w.size(); ++i) s.w[i] = 0.25f * i + step;
  for (size_t i = 0; i < s.b.size(); ++i) s.b[i] = uint16_t(i * 7 + step);
  for (size_t i = 0; i < s.tp.size(); ++i) s.tp[i] = -1.0f * i - step;
  s.rng = "rng-state-" + std::to_string(step);
  return s;
}

// Rank r's contiguous piece of n elements in a world of w.
inline FlatRun Piece(int64_t n, int w, int r) {
  return {n * r / w, n * (r + 1) / w - n * r / w};
}

// What one rank hands to Save: its shards and blobs, and the buffers.
struct Part {
  std::vector<float> tp;  // The rank's column block, row-major.
  std::string cursor;
  std::vector<statestore::ShardData> shards;
  std::vector<statestore::BlobData> blobs;
};

inline std::unique_ptr<Part> MakePart(const State& s, int world, int rank) {
  auto p = std::make_unique<Part>();
  const FlatRun w = Piece(s.w.size(), world, rank);
  const FlatRun b = Piece(s.b.size(), world, rank);
  const FlatRun cols = Piece(kCols, world, rank);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = cols.offset; c < cols.end(); ++c) {
      p->tp.push_back(s.tp[r * kCols + c]);
    }
  }
  p->cursor = "cursor-of-rank-" + std::to_string(rank);
  p->shards.push_back({TensorMeta{"w", DType::kF32, {40, 50}},
                       ShardGeometry::FromRuns({w}),
                       ConstBytes(s.w.data() + w.offset, w.length * 4)});
  p->shards.push_back({TensorMeta{"b", DType::kBF16, {999}},
                       ShardGeometry::FromRuns({b}),
                       ConstBytes(s.b.data() + b.offset, b.length * 2)});
  p->shards.push_back(
      {TensorMeta{"tp", DType::kF32, {kRows, kCols}},
       ShardGeometry::FromBox({{0, cols.offset}, {kRows, cols.length}}),
       ConstBytes(p->tp.data(), p->tp.size() * 4)});
  p->blobs.push_back({"rng", statestore::kReplicatedBlob, ConstBytes(s.rng)});
  p->blobs.push_back({"cursor", rank, ConstBytes(p->cursor)});
  return p;
}

inline CheckpointOptions Options(const std::string& root, int rank, int world) {
  CheckpointOptions o;
  o.root = root;
  o.rank = rank;
  o.world_size = world;
  o.commit_timeout_ms = 10000;
  o.chunk_bytes = 1024;  // Several chunks per shard.
  return o;
}

inline std::string Layout(int world) { return "fsdp=" + std::to_string(world); }

// Runs fn(rank) on `world` threads and joins them.
inline void RunRanks(int world, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

// Every rank opens, saves `step` (state MakeState(step)), and waits.
inline void SaveAll(const std::string& root, int world, uint64_t step,
                    int keep_last = 2) {
  const State s = MakeState(step);
  RunRanks(world, [&](int r) {
    CheckpointOptions o = Options(root, r, world);
    o.keep_last = keep_last;
    auto ckpt = Checkpointer::Open(o);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    auto part = MakePart(s, world, r);
    ASSERT_TRUE(
        (*ckpt)
            ->Save(step, part->shards, part->blobs, Layout(world), "rules")
            .ok());
    EXPECT_TRUE((*ckpt)->Wait().ok()) << r << ": " << (*ckpt)->Wait();
    EXPECT_EQ((*ckpt)->status().committed_step, int64_t(step));
  });
}

template <typename T>
std::vector<T> Read(CheckpointReader* reader, const std::string& name,
                    FlatRun region) {
  std::vector<T> out(region.length);
  Status s = reader->ReadRegion(
      name, region, MutableBytes(out.data(), out.size() * sizeof(T)));
  EXPECT_TRUE(s.ok()) << name << ": " << s;
  return out;
}

template <typename T>
std::vector<T> Slice(const std::vector<T>& v, FlatRun r) {
  return std::vector<T>(v.begin() + r.offset, v.begin() + r.end());
}

// The reader holds `step`'s state, read whole and as pieces of other worlds.
inline void ExpectState(CheckpointReader* reader, uint64_t step) {
  const State s = MakeState(step);
  const int64_t nw = s.w.size(), nt = s.tp.size();
  EXPECT_EQ(Read<float>(reader, "w", {0, nw}), s.w);
  EXPECT_EQ(Read<uint16_t>(reader, "b", {0, int64_t(s.b.size())}), s.b);
  EXPECT_EQ(Read<float>(reader, "tp", {0, nt}), s.tp);
  for (int world : {2, 4}) {
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(Read<float>(reader, "w", Piece(nw, world, r)),
                Slice(s.w, Piece(nw, world, r)));
      EXPECT_EQ(Read<float>(reader, "tp", Piece(nt, world, r)),
                Slice(s.tp, Piece(nt, world, r)));
    }
  }
  auto rng = reader->ReadBlob("rng");
  ASSERT_TRUE(rng.ok()) << rng.status();
  EXPECT_EQ(*rng, s.rng);
}

// Rank `rank`'s store under `root`, opened read-only: its versions.
inline Result<std::vector<statestore::VersionInfo>> RankVersions(
    const std::string& root, int rank) {
  statestore::StoreOptions o;
  o.read_only = true;
  HY_ASSIGN_OR_RETURN(auto store,
                      statestore::Store::Open(RankStorePath(root, rank), o));
  return store->ListVersions();
}

}  // namespace hy::checkpoint

#endif  // HY_TESTS_CHECKPOINT_CHECKPOINT_TEST_UTIL_H_
