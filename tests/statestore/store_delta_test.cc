// XOR-delta chunks in the store: written when smaller, chains bounded, read
// back exactly, and kept alive by Gc as long as a kept version needs them.

#include <gtest/gtest.h>

#include "codec_test_util.h"
#include "hy/statestore/store.h"
#include "raw_db.h"
#include "store_test_util.h"

namespace hy::statestore {
namespace {

using testing::CastBuffer;
using testing::Commit;
using testing::DamageChunk;
using testing::StepF32;
using testing::TempDir;
using testing::WeightLikeBytes;
using testing::WholeShard;

constexpr int64_t kElems = 128 * 1024;  // bf16: 256 KiB, 16 chunks of 16 KiB.

class StoreDeltaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions o;
    o.chunk_bytes = 16 * 1024;
    o.threads = 2;
    o.delta_max_chain = 3;
    store_ = std::move(Store::Open(dir_.path(), o)).value();
    std::vector<uint8_t> f32 = WeightLikeBytes(DType::kF32, kElems * 4, 1);
    for (int v = 1; v <= 7; ++v) {
      versions_.push_back(CastBuffer(f32));
      f32 = StepF32(f32, 1e-6f, 100 + v);  // An RL-sized step.
    }
  }

  SaveStats Save(uint64_t v) {
    SaveStats st;
    Status s = store_->Save(
        {v, 0, {WholeShard("w", DType::kBF16, {kElems}, versions_[v - 1])}, {}},
        &st);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE(store_->Commit(Commit(v)).ok());
    return st;
  }

  void ExpectReads(uint64_t v) {
    std::vector<uint8_t> out(kElems * 2);
    Status s = store_->ReadRegion(v, "w", {0, kElems}, MutableBytes(out));
    ASSERT_TRUE(s.ok()) << "version " << v << ": " << s;
    EXPECT_EQ(out, versions_[v - 1]) << "version " << v;
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  std::vector<std::vector<uint8_t>> versions_;
};

TEST_F(StoreDeltaTest, SmallStepsAreStoredAsBoundedDeltaChains) {
  const SaveStats full = Save(1);
  EXPECT_EQ(full.delta_chunks, 0u);
  std::vector<SaveStats> st;
  for (uint64_t v = 2; v <= 7; ++v) st.push_back(Save(v));
  // v2..v4 are deltas on their predecessor (depth 1..3); v5 would be depth 4
  // > 3, so it is full again; v6 and v7 are deltas on v5.
  for (size_t i : {0u, 1u, 2u, 4u, 5u}) {
    EXPECT_EQ(st[i].delta_chunks, st[i].new_chunks) << "version " << i + 2;
    EXPECT_GT(st[i].new_chunks, 0u);
    EXPECT_LT(st[i].new_bytes * 5, full.new_bytes) << "version " << i + 2;
  }
  EXPECT_EQ(st[3].delta_chunks, 0u);
  EXPECT_GT(st[3].new_bytes * 2, full.new_bytes);
  for (uint64_t v = 1; v <= 7; ++v) ExpectReads(v);
  auto report = store_->Verify(4);  // Depth 3: decodes 4 chunks per chunk.
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok());
}

// Verify checks a delta's stored bytes without decoding it, and follows its
// chain: a flipped bit in a base chunk two saves back makes the delta on
// top of it bad too, exactly as reading it does.
TEST_F(StoreDeltaTest, VerifyFollowsTheChainUnderADelta) {
  for (uint64_t v = 1; v <= 3; ++v) Save(v);
  store_.reset();
  const Hash128 victim = DamageChunk(dir_.path(), 0);  // Epoch 1: v1's.
  StoreOptions o;
  o.chunk_bytes = 16 * 1024;
  store_ = std::move(Store::Open(dir_.path(), o)).value();
  for (uint64_t v : {3, 1}) {
    auto report = store_->Verify(v);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->chunks_checked, 16u);
    ASSERT_EQ(report->bad.size(), 1u) << "version " << v;
    EXPECT_TRUE(report->bad[0].status.IsDataLoss());
    if (v == 1) {
      EXPECT_EQ(report->bad[0].address, victim);
    } else {
      EXPECT_NE(report->bad[0].address, victim);
      EXPECT_NE(report->bad[0].status.message().find("base of chunk"),
                std::string::npos)
          << report->bad[0].status;
    }
  }
  EXPECT_TRUE(store_->Verify(2)->bad.size() == 1u);
  std::vector<uint8_t> out(kElems * 2);
  EXPECT_TRUE(
      store_->ReadRegion(3, "w", {0, kElems}, MutableBytes(out)).IsDataLoss());
}

TEST_F(StoreDeltaTest, GcKeepsTheBasesOfKeptDeltas) {
  for (uint64_t v = 1; v <= 7; ++v) Save(v);
  GcOptions gc;
  gc.keep_last = 1;  // v7, a delta on v6, a delta on v5 (full).
  gc.pinned = {4};   // v4 needs v3, v2 and v1.
  auto report = store_->Gc(gc);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->dropped_versions, (std::vector<uint64_t>{1, 2, 3, 5, 6}));
  EXPECT_TRUE(store_->ReadManifest(2).status().IsNotFound());
  ExpectReads(7);
  ExpectReads(4);
  ASSERT_TRUE(store_->Verify(7)->ok());
  ASSERT_TRUE(store_->Verify(4)->ok());

  gc.pinned.clear();  // Now v4's chain can go.
  report = store_->Gc(gc);
  ASSERT_TRUE(report.ok());
  EXPECT_GT(report->dropped_chunks, 0u);
  ExpectReads(7);
}

}  // namespace
}  // namespace hy::statestore
