// CheckpointReader on real RocksDB stores under a temp dir: the newest
// step with a committed copy of every part, read back whole, as pieces of
// other worlds and as boxes across old ranks (ReadRuns), while a new run
// writes, and its errors.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "checkpoint_test_util.h"
#include "hy/checkpoint/checkpoint.h"
#include "hy/statestore/store.h"
#include "testing/temp_dir.h"

namespace hy::checkpoint {
namespace {

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
