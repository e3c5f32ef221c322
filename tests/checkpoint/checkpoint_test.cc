// Checkpointer / CheckpointReader on real RocksDB stores under a temp dir.
// Each rank is a thread with its own Checkpointer and its own store, as the
// processes of a run would be.

#include "hy/checkpoint/checkpoint.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include "hy/recovery/node_layout.h"
#include "hy/statestore/store.h"
#include "testing/temp_dir.h"

namespace hy::checkpoint {
namespace {

using statestore::BlobData;
using statestore::ShardData;

// The whole training state at one step: "w" and "b" are saved as FSDP flat
// pieces, "tp" as column blocks (boxes).
constexpr int64_t kRows = 24, kCols = 30;
struct State {
  std::vector<float> w = std::vector<float>(40 * 50);
  std::vector<uint16_t> b = std::vector<uint16_t>(999);  // bf16 bits.
  std::vector<float> tp = std::vector<float>(kRows * kCols);
  std::string rng;
};

State MakeState(uint64_t step) {
  State s;
  for (size_t i = 0; i < s.w.size(); ++i) s.w[i] = 0.25f * i + step;
  for (size_t i = 0; i < s.b.size(); ++i) s.b[i] = uint16_t(i * 7 + step);
  for (size_t i = 0; i < s.tp.size(); ++i) s.tp[i] = -1.0f * i - step;
  s.rng = "rng-state-" + std::to_string(step);
  return s;
}

// Rank r's contiguous piece of n elements in a world of w.
FlatRun Piece(int64_t n, int w, int r) {
  return {n * r / w, n * (r + 1) / w - n * r / w};
}

// What one rank hands to Save: its shards and blobs, and the buffers.
struct Part {
  std::vector<float> tp;  // The rank's column block, row-major.
  std::string cursor;
  std::vector<ShardData> shards;
  std::vector<BlobData> blobs;
};

std::unique_ptr<Part> MakePart(const State& s, int world, int rank) {
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

CheckpointOptions Options(const std::string& root, int rank, int world) {
  CheckpointOptions o;
  o.root = root;
  o.rank = rank;
  o.world_size = world;
  o.commit_timeout_ms = 10000;
  o.chunk_bytes = 1024;  // Several chunks per shard.
  return o;
}

std::string Layout(int world) { return "fsdp=" + std::to_string(world); }

// Runs fn(rank) on `world` threads and joins them.
void RunRanks(int world, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

// Every rank opens, saves `step` (state MakeState(step)), and waits.
void SaveAll(const std::string& root, int world, uint64_t step,
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
void ExpectState(CheckpointReader* reader, uint64_t step) {
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

TEST(CheckpointTest, ThreeRanksCommitAndAnyRegionReadsBack) {
  TempDir dir;
  SaveAll(dir.path(), 3, 7);
  auto latest = Checkpointer::LatestCommittedStep(dir.path());
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 7u);

  auto reader = CheckpointReader::Open(dir.path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->step(), 7u);
  EXPECT_EQ((*reader)->commit().world_size, 3);
  EXPECT_EQ((*reader)->commit().layout, "fsdp=3");
  EXPECT_EQ((*reader)->commit().model_rules, "rules");
  ExpectState(reader->get(), 7);
  // A region across all three old ranks, and a tiny one inside a box.
  const State s = MakeState(7);
  const FlatRun across{600, 900};
  EXPECT_EQ(Read<float>(reader->get(), "w", across), Slice(s.w, across));
  EXPECT_EQ(Read<float>(reader->get(), "tp", {31, 3}), Slice(s.tp, {31, 3}));
  for (int r = 0; r < 3; ++r) {
    auto cursor = (*reader)->ReadBlob("cursor", r);
    ASSERT_TRUE(cursor.ok()) << cursor.status();
    EXPECT_EQ(*cursor, "cursor-of-rank-" + std::to_string(r));
  }
  auto meta = (*reader)->FindTensor("b");
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->dtype, DType::kBF16);
}

// A box of another layout (a block of rows and columns of "tp", saved as
// column blocks by 3 ranks): one ReadRuns of its rows, each holder read
// once (whole, past kMaxPiecesPerRead pieces; piece by piece below).
TEST(CheckpointTest, ReadRunsFillsABoxAcrossOldRanks) {
  TempDir dir;
  SaveAll(dir.path(), 3, 5);
  auto reader = CheckpointReader::Open(dir.path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  const State s = MakeState(5);
  for (const auto& [r0, r1] : {std::pair{5, 18}, std::pair{2, 5}}) {
    std::vector<FlatRun> runs;
    std::vector<float> want;
    for (int64_t r = r0; r < r1; ++r) {
      runs.push_back({r * kCols + 7, 15});  // Columns 7..21: all 3 ranks.
      for (int64_t c = 7; c < 22; ++c) want.push_back(s.tp[r * kCols + c]);
    }
    std::vector<float> got(want.size());
    Status st = (*reader)->ReadRuns(
        "tp", runs, MutableBytes(got.data(), got.size() * sizeof(float)));
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(got, want) << "rows " << r0 << ".." << r1;
  }
  std::vector<float> out(4);
  EXPECT_TRUE(
      (*reader)
          ->ReadRuns("tp", {{0, 2}, {10, 2}}, MutableBytes(out.data(), 12))
          .IsInvalidArgument());
  EXPECT_TRUE((*reader)
                  ->ReadRuns("tp", {{0, 2}, {kRows * kCols - 1, 2}},
                             MutableBytes(out.data(), 16))
                  .IsInvalidArgument());
  EXPECT_TRUE((*reader)
                  ->ReadRuns("nope", {{0, 1}}, MutableBytes(out.data(), 4))
                  .IsNotFound());
}

TEST(CheckpointTest, SaveReturnsBeforeCommitAndCopiesTheBuffers) {
  TempDir dir;
  const State s = MakeState(3);
  RunRanks(2, [&](int r) {
    auto ckpt = Checkpointer::Open(Options(dir.path(), r, 2));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    State mine = s;  // The rank's live tensors.
    auto part = MakePart(mine, 2, r);
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_TRUE(
        (*ckpt)->Save(3, part->shards, part->blobs, Layout(2), "rules").ok());
    // Rank 0 cannot have committed: rank 1 has not even saved yet.
    if (r == 0) {
      EXPECT_EQ((*ckpt)->status().in_flight_step, 3);
    }
    // Training goes on and overwrites every buffer.
    std::fill(mine.w.begin(), mine.w.end(), -7.0f);
    std::fill(mine.b.begin(), mine.b.end(), 0xffff);
    std::fill(part->tp.begin(), part->tp.end(), -7.0f);
    std::fill(mine.rng.begin(), mine.rng.end(), 'x');
    EXPECT_TRUE((*ckpt)->Wait().ok()) << (*ckpt)->Wait();
    EXPECT_EQ((*ckpt)->status().in_flight_step, -1);
  });
  auto reader = CheckpointReader::Open(dir.path(), 3);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ExpectState(reader->get(), 3);
}

TEST(CheckpointTest, ReadInPlaceHoldsTheBuffersUntilWaitRead) {
  TempDir dir;
  const State s = MakeState(4);
  RunRanks(2, [&](int r) {
    CheckpointOptions o = Options(dir.path(), r, 2);
    o.read_in_place = true;
    o.staging_bytes = 16;  // Far below the part: only the blobs are copied.
    auto ckpt = Checkpointer::Open(o);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    (*ckpt)->WaitRead();  // Nothing in flight: returns at once.
    State mine = s;       // The rank's live tensors.
    auto part = MakePart(mine, 2, r);
    // after_read runs once the part is saved, before the commit.
    std::atomic<int64_t> committed_then{-2};
    Checkpointer* c = ckpt->get();
    ASSERT_TRUE((*ckpt)
                    ->Save(4, part->shards, part->blobs, Layout(2), "rules",
                           [&] { committed_then = c->status().committed_step; })
                    .ok());
    // The blobs are the caller's again at once; the tensors after WaitRead
    // (the next optimizer step), while the commit goes on.
    std::fill(mine.rng.begin(), mine.rng.end(), 'x');
    (*ckpt)->WaitRead();
    std::fill(mine.w.begin(), mine.w.end(), -7.0f);
    std::fill(mine.b.begin(), mine.b.end(), 0xffff);
    std::fill(part->tp.begin(), part->tp.end(), -7.0f);
    EXPECT_TRUE((*ckpt)->Wait().ok()) << (*ckpt)->Wait();
    EXPECT_EQ((*ckpt)->status().committed_step, 4);
    EXPECT_EQ(committed_then, -1);  // Ran, and before step 4 committed.
  });
  auto reader = CheckpointReader::Open(dir.path(), 4);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ExpectState(reader->get(), 4);
}

TEST(CheckpointTest, SuccessiveCheckpointsKeepTheNewest) {
  TempDir dir;
  const State states[] = {MakeState(10), MakeState(20), MakeState(30)};
  RunRanks(2, [&](int r) {
    auto ckpt = Checkpointer::Open(Options(dir.path(), r, 2));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    for (const State& s : states) {
      auto part = MakePart(s, 2, r);  // Save waits for the previous one.
      const uint64_t step = &s - states + 1;
      ASSERT_TRUE(
          (*ckpt)
              ->Save(step * 10, part->shards, part->blobs, Layout(2), "rules")
              .ok());
    }
    EXPECT_TRUE((*ckpt)->Wait().ok()) << (*ckpt)->Wait();
    EXPECT_EQ((*ckpt)->status().committed_step, 30);
  });
  // keep_last = 2: step 10 is gone from every store, 20 and 30 remain.
  for (int r = 0; r < 2; ++r) {
    statestore::StoreOptions o;
    o.read_only = true;
    auto store = statestore::Store::Open(RankStorePath(dir.path(), r), o);
    ASSERT_TRUE(store.ok()) << store.status();
    auto versions = (*store)->ListVersions();
    ASSERT_TRUE(versions.ok());
    std::vector<uint64_t> committed;
    for (const auto& v : *versions) {
      if (v.committed) committed.push_back(v.version);
    }
    EXPECT_EQ(committed, (std::vector<uint64_t>{recovery::MakeVersion(20, 0),
                                                recovery::MakeVersion(30, 0)}))
        << "rank " << r;
  }
  EXPECT_TRUE(CheckpointReader::Open(dir.path(), 10).status().IsNotFound());
  for (uint64_t step : {20, 30}) {
    auto reader = CheckpointReader::Open(dir.path(), step);
    ASSERT_TRUE(reader.ok()) << reader.status();
    ExpectState(reader->get(), step);
  }
}

TEST(CheckpointTest, RankThatNeverSavesAbortsTheVersion) {
  TempDir dir;
  const State s = MakeState(4);
  RunRanks(3, [&](int r) {
    CheckpointOptions o = Options(dir.path(), r, 3);
    o.commit_timeout_ms = 1500;
    auto ckpt = Checkpointer::Open(o);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    if (r == 2) return;  // Opens its store, never saves.
    auto part = MakePart(s, 3, r);
    ASSERT_TRUE(
        (*ckpt)->Save(4, part->shards, part->blobs, Layout(3), "rules").ok());
    const Status st = (*ckpt)->Wait();
    const CheckpointStatus cs = (*ckpt)->status();
    EXPECT_EQ(cs.committed_step, -1);
    EXPECT_EQ(cs.last_error, st);
    if (r == 0) {
      EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st;
      EXPECT_NE(st.message().find("ranks 2 did not prepare"), std::string::npos)
          << st;
    } else {
      EXPECT_EQ(st.code(), StatusCode::kAborted) << st;
    }
  });
  EXPECT_TRUE(
      Checkpointer::LatestCommittedStep(dir.path()).status().IsNotFound());
  EXPECT_TRUE(CheckpointReader::Open(dir.path()).status().IsNotFound());
}

// Writes a "dead run"'s part of `version` into rank r's store: prepared,
// never committed.
void SaveDeadPart(const std::string& root, int world, int r, uint64_t v) {
  const State s = MakeState(v + 1000);
  auto part = MakePart(s, world, r);
  statestore::StoreOptions o;
  o.chunk_bytes = 1024;
  auto store = statestore::Store::Open(RankStorePath(root, r), o);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(
      (*store)
          ->Save({recovery::MakeVersion(v, 0), r, part->shards, part->blobs},
                 nullptr)
          .ok());
}

TEST(CheckpointTest, LeftoverOfADeadRunIsAbortedOnOpen) {
  TempDir dir;
  SaveAll(dir.path(), 2, 5);
  for (int r = 0; r < 2; ++r) SaveDeadPart(dir.path(), 2, r, 10);

  // The new run. Rank 0 aborts step 10 on Open; rank 1 copies that.
  std::unique_ptr<Checkpointer> ckpt[2];
  for (int r = 0; r < 2; ++r) {
    auto c = Checkpointer::Open(Options(dir.path(), r, 2));
    ASSERT_TRUE(c.ok()) << c.status();
    ckpt[r] = std::move(c).value();
    EXPECT_EQ(ckpt[r]->status().committed_step, 5);
  }
  for (int r = 0; r < 2; ++r) {
    statestore::StoreOptions o;
    o.read_only = true;
    auto store = statestore::Store::Open(RankStorePath(dir.path(), r), o);
    ASSERT_TRUE(store.ok()) << store.status();
    auto versions = (*store)->ListVersions();
    ASSERT_TRUE(versions.ok());
    ASSERT_EQ(versions->back().version, recovery::MakeVersion(10, 0));
    EXPECT_TRUE(versions->back().aborted) << "rank " << r;
    EXPECT_TRUE(versions->back().prepared.empty()) << "rank " << r;
  }

  // Step 10 can never be saved again (no dead part can mix into it): it
  // fails on both ranks and leaves step 5 as it was. Step 15 commits.
  const State s10 = MakeState(10), s15 = MakeState(15);
  RunRanks(2, [&](int r) {
    auto part = MakePart(s10, 2, r);
    ASSERT_TRUE(
        ckpt[r]->Save(10, part->shards, part->blobs, Layout(2), "rules").ok());
    const Status st = ckpt[r]->Wait();
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st;
    EXPECT_NE(st.message().find("aborted"), std::string::npos) << st;
    part = MakePart(s15, 2, r);
    ASSERT_TRUE(
        ckpt[r]->Save(15, part->shards, part->blobs, Layout(2), "rules").ok());
    EXPECT_TRUE(ckpt[r]->Wait().ok()) << ckpt[r]->Wait();
  });
  auto reader = CheckpointReader::Open(dir.path(), 5);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ExpectState(reader->get(), 5);
  reader = CheckpointReader::Open(dir.path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->step(), 15u);
  ExpectState(reader->get(), 15);
}

TEST(CheckpointTest, FollowerThatMissedTheCommitCopiesItOnOpen) {
  TempDir dir;
  for (int r = 0; r < 2; ++r) SaveDeadPart(dir.path(), 2, r, 3);
  {  // Rank 0 committed; rank 1 died before copying the decision.
    auto store = statestore::Store::Open(RankStorePath(dir.path(), 0), {});
    ASSERT_TRUE(store.ok());
    statestore::CommitRecord c;
    c.version = recovery::MakeVersion(3, 0);
    c.step = 3;
    c.world_size = 2;
    c.ranks = {0};
    ASSERT_TRUE((*store)->Commit(c).ok());
  }
  Status s = CheckpointReader::Open(dir.path()).status();
  EXPECT_TRUE(s.IsDataLoss()) << s;
  EXPECT_NE(s.message().find("prepared but not rank 0's commit"),
            std::string::npos)
      << s;
  ASSERT_TRUE(Checkpointer::Open(Options(dir.path(), 1, 2)).ok());
  auto reader = CheckpointReader::Open(dir.path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  ExpectState(reader->get(), 1003);  // The dead run's data (v + 1000).
}

TEST(CheckpointTest, ResumeOnADifferentWorldSizeWhileTheNewRunWrites) {
  TempDir dir;
  SaveAll(dir.path(), 3, 5);
  // The new world (4 ranks) opens its stores read-write first, then every
  // rank reads the old version through read-only opens, then saves.
  constexpr int kNew = 4;
  std::vector<std::unique_ptr<Checkpointer>> ckpt(kNew);
  for (int r = 0; r < kNew; ++r) {
    auto c = Checkpointer::Open(Options(dir.path(), r, kNew));
    ASSERT_TRUE(c.ok()) << c.status();
    ckpt[r] = std::move(c).value();
  }
  std::vector<double> commit_ms(kNew);
  RunRanks(kNew, [&](int r) {
    auto reader = CheckpointReader::Open(dir.path());
    ASSERT_TRUE(reader.ok()) << reader.status();
    ASSERT_EQ((*reader)->step(), 5u);
    ExpectState(reader->get(), 5);
    const auto t0 = std::chrono::steady_clock::now();
    const State s = MakeState(6);
    auto part = MakePart(s, kNew, r);
    ASSERT_TRUE(ckpt[r]
                    ->Save(6, part->shards, part->blobs, Layout(kNew), "rules")
                    .ok());
    EXPECT_TRUE(ckpt[r]->Wait().ok()) << ckpt[r]->Wait();
    commit_ms[r] = std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
  });
  std::printf(
      "save + commit across %d stores: rank 0 %.0f ms, rank 3 %.0f ms\n", kNew,
      commit_ms[0], commit_ms[3]);
  auto reader = CheckpointReader::Open(dir.path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->commit().world_size, kNew);
  ExpectState(reader->get(), 6);
}

TEST(CheckpointTest, ReaderErrors) {
  TempDir dir;
  const std::string missing = dir.path() + "/nothing";
  EXPECT_TRUE(CheckpointReader::Open(missing).status().IsNotFound());
  EXPECT_TRUE(Checkpointer::LatestCommittedStep(missing).status().IsNotFound());

  // Two ranks that leave a hole in "w": elements [1000, 1010).
  const State s = MakeState(2);
  RunRanks(2, [&](int r) {
    auto ckpt = Checkpointer::Open(Options(dir.path(), r, 2));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    auto part = MakePart(s, 2, r);
    if (r == 1) {
      part->shards[0].geometry = ShardGeometry::FromRuns({{1010, 990}});
      part->shards[0].data = ConstBytes(s.w.data() + 1010, 990 * 4);
    }
    ASSERT_TRUE(
        (*ckpt)->Save(2, part->shards, part->blobs, Layout(2), "rules").ok());
    EXPECT_TRUE((*ckpt)->Wait().ok()) << (*ckpt)->Wait();
  });
  EXPECT_TRUE(CheckpointReader::Open(dir.path(), 3).status().IsNotFound());
  auto reader = CheckpointReader::Open(dir.path(), 2);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> out(2000);
  Status st =
      (*reader)->ReadRegion("w", {0, 2000}, MutableBytes(out.data(), 8000));
  EXPECT_TRUE(st.IsDataLoss()) << st;
  EXPECT_NE(st.message().find("'w'"), std::string::npos) << st;
  EXPECT_NE(st.message().find("[1000, 1010)"), std::string::npos) << st;
  EXPECT_EQ(Read<float>(reader->get(), "w", {1010, 990}),
            Slice(s.w, {1010, 990}));
  EXPECT_TRUE((*reader)
                  ->ReadRegion("v", {0, 1}, MutableBytes(out.data(), 4))
                  .IsNotFound());
  EXPECT_TRUE((*reader)
                  ->ReadRegion("w", {1990, 20}, MutableBytes(out.data(), 80))
                  .IsInvalidArgument());
  EXPECT_TRUE((*reader)
                  ->ReadRegion("w", {0, 10}, MutableBytes(out.data(), 41))
                  .IsInvalidArgument());
  EXPECT_TRUE((*reader)->ReadBlob("nope").status().IsNotFound());
  EXPECT_TRUE((*reader)->ReadBlob("cursor", 5).status().IsNotFound());
}

}  // namespace
}  // namespace hy::checkpoint
