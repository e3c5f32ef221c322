#include "hy/trainer/data/data_cursor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

namespace hy::trainer {
namespace {

const Hash128 kFingerprint{0x1234, 0x5678};

// The positions' records that `world` ranks see over `iterations` batches of
// `batch`, each rank taking a contiguous slice of the global batch and the
// batches concatenated in global sample order.
std::vector<uint64_t> RunOnRanks(DataCursor* cursor, uint64_t world,
                                 uint64_t batch, int iterations) {
  std::vector<uint64_t> seen;
  for (int it = 0; it < iterations; ++it) {
    const std::vector<uint64_t> global = cursor->PeekBatch(batch);
    for (uint64_t rank = 0; rank < world; ++rank) {
      const uint64_t per_rank = batch / world;
      for (uint64_t j = rank * per_rank; j < (rank + 1) * per_rank; ++j) {
        EXPECT_EQ(cursor->RecordAt(cursor->consumed() + j), global[j]);
        seen.push_back(global[j]);
      }
    }
    cursor->Advance(batch);
  }
  return seen;
}

TEST(DataCursorTest, EpochOrderIsAPermutationThatChangesPerEpoch) {
  constexpr uint64_t kSize = 37;
  const std::vector<uint64_t> e0 = EpochOrder(kSize, 5, 0, true);
  const std::vector<uint64_t> e1 = EpochOrder(kSize, 5, 1, true);
  std::vector<uint64_t> identity(kSize);
  std::iota(identity.begin(), identity.end(), uint64_t{0});
  for (const auto& e : {e0, e1}) {
    std::vector<uint64_t> sorted = e;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, identity);
  }
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, identity);
  EXPECT_NE(e0, EpochOrder(kSize, 6, 0, true));
  EXPECT_EQ(e0, EpochOrder(kSize, 5, 0, true));
  EXPECT_EQ(EpochOrder(kSize, 5, 3, false), identity);
}

// Every record once per epoch, across batches that straddle epochs.
TEST(DataCursorTest, EachRecordOncePerEpoch) {
  constexpr uint64_t kSize = 10;
  DataCursor cursor(kSize, kFingerprint, 7, true);
  std::vector<uint64_t> stream;
  for (int it = 0; it < 5; ++it) {  // 5 x 8 = 40 = 4 epochs.
    for (uint64_t r : cursor.PeekBatch(8)) stream.push_back(r);
    cursor.Advance(8);
  }
  EXPECT_EQ(cursor.epoch(), 4u);
  for (uint64_t e = 0; e < 4; ++e) {
    std::set<uint64_t> epoch(stream.begin() + e * kSize,
                             stream.begin() + (e + 1) * kSize);
    EXPECT_EQ(epoch.size(), kSize) << "epoch " << e;
  }
}

// 5 iterations of B=8 on 2 ranks see the same records as 3 iterations on 2
// ranks, a checkpoint, a restore, and 2 more iterations on 4 ranks (or 1).
TEST(DataCursorTest, ResumeOnAnyWorldSizeContinuesTheStream) {
  constexpr uint64_t kSize = 13;
  DataCursor straight(kSize, kFingerprint, 42, true);
  const std::vector<uint64_t> expected = RunOnRanks(&straight, 2, 8, 5);

  for (uint64_t world_after : {1u, 2u, 4u}) {
    DataCursor before(kSize, kFingerprint, 42, true);
    std::vector<uint64_t> seen = RunOnRanks(&before, 2, 8, 3);
    const std::string saved = EncodeDataPosition(before.position());

    auto position = DecodeDataPosition(saved);
    ASSERT_TRUE(position.ok()) << position.status();
    EXPECT_EQ(*position, before.position());
    DataCursor after(kSize, kFingerprint, 42, true);
    ASSERT_TRUE(after.Restore(*position, false).ok());
    EXPECT_EQ(after.consumed(), 24u);
    for (uint64_t r : RunOnRanks(&after, world_after, 8, 2)) {
      seen.push_back(r);
    }
    EXPECT_EQ(seen, expected) << "world after resume " << world_after;
  }
}

TEST(DataCursorTest, RestoreRefusesAChangedDatasetUnlessAllowed) {
  DataCursor saved_cursor(20, kFingerprint, 1, true);
  saved_cursor.Advance(30);
  const DataPosition saved = saved_cursor.position();

  DataCursor edited(20, Hash128{0x1234, 0x9999}, 1, true);
  Status s = edited.Restore(saved, false);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("dataset fingerprint"), std::string_view::npos)
      << s;
  EXPECT_EQ(edited.consumed(), 0u);

  DataCursor resized(21, kFingerprint, 2, true);
  s = resized.Restore(saved, false);
  EXPECT_NE(s.message().find("dataset size 20 -> 21"), std::string_view::npos)
      << s;
  EXPECT_NE(s.message().find("seed 1 -> 2"), std::string_view::npos) << s;

  ASSERT_TRUE(edited.Restore(saved, true).ok());
  EXPECT_EQ(edited.consumed(), 30u);
  EXPECT_EQ(edited.position().fingerprint, (Hash128{0x1234, 0x9999}));
}

TEST(DataCursorTest, DecodeRejectsDamagedPositions) {
  DataPosition p{99, 3, false, 1000, Hash128{1, 2}};
  const std::string good = EncodeDataPosition(p);
  auto back = DecodeDataPosition(good);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, p);

  EXPECT_TRUE(DecodeDataPosition("").status().IsDataLoss());
  EXPECT_TRUE(DecodeDataPosition("[1]").status().IsDataLoss());
  EXPECT_TRUE(DecodeDataPosition("{\"version\":1}").status().IsDataLoss());
  std::string bad_fp = good;
  bad_fp.replace(bad_fp.find("00000000"), 8, "zzzzzzzz");
  EXPECT_TRUE(DecodeDataPosition(bad_fp).status().IsDataLoss());
  std::string negative = good;
  negative.replace(negative.find("99"), 2, "-9");
  EXPECT_TRUE(DecodeDataPosition(negative).status().IsDataLoss());
  std::string v2 = good;
  v2.replace(v2.find("\"version\":1"), 11, "\"version\":2");
  EXPECT_TRUE(DecodeDataPosition(v2).status().IsInvalidArgument());
}

}  // namespace
}  // namespace hy::trainer
