// Checkpointer on real RocksDB stores under a temp dir: a step committed
// across the ranks' stores, saves that return before the commit, retention,
// and what a dead run or a rank that never saved leaves behind. Each rank
// is a thread with its own Checkpointer and its own store, as the
// processes of a run would be.

#include "hy/checkpoint/checkpoint.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "checkpoint_test_util.h"
#include "hy/recovery/node_layout.h"
#include "hy/statestore/store.h"
#include "testing/temp_dir.h"

namespace hy::checkpoint {
namespace {

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
    auto versions = RankVersions(dir.path(), r);
    ASSERT_TRUE(versions.ok()) << versions.status();
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
    auto versions = RankVersions(dir.path(), r);
    ASSERT_TRUE(versions.ok()) << versions.status();
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
  // A reader loads the decided step at once, writing nothing: rank 1's
  // part stays prepared until its Checkpointer (or recovery) settles it.
  {
    auto reader = CheckpointReader::Open(dir.path());
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->step(), 3u);
    ExpectState(reader->get(), 1003);  // The dead run's data (v + 1000).
  }
  auto versions = RankVersions(dir.path(), 1);
  ASSERT_TRUE(versions.ok()) << versions.status();
  ASSERT_EQ(versions->size(), 1u);
  EXPECT_FALSE(versions->back().committed);
  ASSERT_TRUE(Checkpointer::Open(Options(dir.path(), 1, 2)).ok());
  versions = RankVersions(dir.path(), 1);
  ASSERT_TRUE(versions.ok()) << versions.status();
  EXPECT_TRUE(versions->back().committed);
  auto reader = CheckpointReader::Open(dir.path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  ExpectState(reader->get(), 1003);
}

TEST(CheckpointTest, UndecidedPreparedPartsAreNeverRead) {
  TempDir dir;
  SaveAll(dir.path(), 2, 2);
  // Step 3 prepared on both ranks, decided by none.
  for (int r = 0; r < 2; ++r) SaveDeadPart(dir.path(), 2, r, 3);
  auto reader = CheckpointReader::Open(dir.path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->step(), 2u);
  ExpectState(reader->get(), 2);
  EXPECT_TRUE(CheckpointReader::Open(dir.path(), 3).status().IsNotFound());
}

}  // namespace
}  // namespace hy::checkpoint
