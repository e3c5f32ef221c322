// The store's protocol edges: aborting a version, what Commit refuses, and
// the limits Open and Save enforce.

#include <gtest/gtest.h>

#include "codec_test_util.h"
#include "hy/statestore/store.h"
#include "store_test_util.h"

namespace hy::statestore {
namespace {

using testing::Bytes;
using testing::Commit;
using testing::SmallChunks;
using testing::TempDir;
using testing::WholeShard;

SavePart Part(uint64_t v, int rank, const std::vector<uint8_t>& d,
              std::vector<int64_t> shape, FlatRun run) {
  SavePart p;
  p.version = v;
  p.rank = rank;
  ShardData s;
  s.meta = TensorMeta{"w", DType::kU8, std::move(shape)};
  s.geometry = ShardGeometry::FromRuns({run});
  s.data = ConstBytes(d);
  p.shards.push_back(s);
  return p;
}

TEST(StoreProtocolTest, AbortedVersionCanNeverCommit) {
  TempDir dir;
  auto store = *Store::Open(dir.path(), SmallChunks());
  const auto a = Bytes(5000, 1);
  ASSERT_TRUE(
      store->Save({1, 0, {WholeShard("w", DType::kU8, {5000}, a)}, {}}, nullptr)
          .ok());
  ASSERT_TRUE(store->Commit(Commit(1)).ok());
  ASSERT_TRUE(
      store->Save({2, 0, {WholeShard("w", DType::kU8, {5000}, a)}, {}}, nullptr)
          .ok());
  // A restarted process finds the dead one's part: saving over it is refused.
  EXPECT_EQ(
      store->Save({2, 0, {WholeShard("w", DType::kU8, {5000}, a)}, {}}, nullptr)
          .code(),
      StatusCode::kAlreadyExists);
  ASSERT_TRUE(store->Abort(2).ok());
  auto versions = *store->ListVersions();
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_TRUE(versions[1].aborted);
  EXPECT_TRUE(versions[1].prepared.empty());
  EXPECT_EQ(
      store->Save({2, 0, {WholeShard("w", DType::kU8, {5000}, a)}, {}}, nullptr)
          .code(),
      StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->Commit(Commit(2)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->Abort(1).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store->Abort(2).ok());  // Idempotent.
  ASSERT_TRUE(
      store->Save({3, 0, {WholeShard("w", DType::kU8, {5000}, a)}, {}}, nullptr)
          .ok());
  ASSERT_TRUE(store->Commit(Commit(3)).ok());
  EXPECT_TRUE(store->Verify(3)->ok());
}

TEST(StoreProtocolTest, CommitRefusesPartsThatDoNotFit) {
  TempDir dir;
  auto store = *Store::Open(dir.path(), SmallChunks());
  const auto half = Bytes(500, 1);
  // Ranks disagree on the tensor's shape.
  ASSERT_TRUE(store->Save(Part(1, 0, half, {1000}, {0, 500}), nullptr).ok());
  ASSERT_TRUE(store->Save(Part(1, 1, half, {1001}, {500, 500}), nullptr).ok());
  Status s = store->Commit(Commit(1, 2));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("disagree"), std::string_view::npos) << s;
  // Elements [800, 1000) are held by nobody.
  ASSERT_TRUE(store->Save(Part(2, 0, half, {1000}, {0, 500}), nullptr).ok());
  const auto part = Bytes(300, 2);
  ASSERT_TRUE(store->Save(Part(2, 1, part, {1000}, {500, 300}), nullptr).ok());
  s = store->Commit(Commit(2, 2));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("from 800 on"), std::string_view::npos) << s;
  // Replicated blobs with different bytes.
  SavePart p0 = Part(3, 0, half, {1000}, {0, 500});
  SavePart p1 = Part(3, 1, half, {1000}, {500, 500});
  const std::string c0 = "lr=1e-6", c1 = "lr=2e-6";
  p0.blobs.push_back({"config", kReplicatedBlob, ConstBytes(c0)});
  p1.blobs.push_back({"config", kReplicatedBlob, ConstBytes(c1)});
  ASSERT_TRUE(store->Save(p0, nullptr).ok());
  ASSERT_TRUE(store->Save(p1, nullptr).ok());
  s = store->Commit(Commit(3, 2));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("config"), std::string_view::npos) << s;
  EXPECT_TRUE(store->LatestCommitted().status().IsNotFound());
}

TEST(StoreProtocolTest, LimitsAreChecked) {
  TempDir dir;
  StoreOptions o = SmallChunks();
  o.delta_max_chain = kMaxDeltaChain + 1;
  EXPECT_TRUE(Store::Open(dir.Sub("a"), o).status().IsInvalidArgument());
  o = SmallChunks(kMaxChunkBytes * 2);
  EXPECT_TRUE(Store::Open(dir.Sub("b"), o).status().IsInvalidArgument());
  o = SmallChunks(100);  // Not a multiple of 8.
  EXPECT_TRUE(Store::Open(dir.Sub("c"), o).status().IsInvalidArgument());
  auto store = *Store::Open(dir.Sub("d"), SmallChunks());
  const auto a = Bytes(64, 1);
  EXPECT_TRUE(
      store
          ->Save(
              {kMaxVersion + 1, 0, {WholeShard("w", DType::kU8, {64}, a)}, {}},
              nullptr)
          .IsInvalidArgument());
  CommitRecord c = Commit(UINT64_MAX);
  EXPECT_TRUE(store->Commit(c).IsInvalidArgument());
}

// Several SST writers at once store the same part as one: the same chunks,
// bytes and contents, every epoch sealed (Gc keeps them all).
TEST(StoreProtocolTest, ParallelIngestWritersStoreTheSamePart) {
  TempDir dir;
  const auto a = testing::WeightLikeBytes(DType::kF32, 200 * 1024, 5);
  const auto b = testing::WeightLikeBytes(DType::kBF16, 72 * 1024 + 6, 6);
  SaveStats first;
  for (int writers : {1, 2, 5}) {
    SCOPED_TRACE(writers);
    StoreOptions o = SmallChunks(8 * 1024);
    o.ingest_batch_bytes = 5 * 8 * 1024;  // Batches of 1 to 5 chunks.
    o.ingest_writers = writers;
    auto store = *Store::Open(dir.Sub("w" + std::to_string(writers)), o);
    SaveStats st;
    ASSERT_TRUE(store
                    ->Save({1,
                            0,
                            {WholeShard("a", DType::kF32, {50 * 1024}, a),
                             WholeShard("b", DType::kBF16, {36 * 1024 + 3}, b)},
                            {}},
                           &st)
                    .ok());
    ASSERT_TRUE(store->Commit(Commit(1)).ok());
    if (writers == 1) first = st;
    EXPECT_EQ(st.new_chunks, first.new_chunks);
    EXPECT_EQ(st.new_bytes, first.new_bytes);
    EXPECT_GT(st.new_chunks, 20u);
    auto gc = store->Gc(GcOptions());
    ASSERT_TRUE(gc.ok()) << gc.status();
    EXPECT_EQ(gc->dropped_chunks, 0u);  // Every epoch was sealed.
    std::vector<uint8_t> out_a(a.size()), out_b(b.size());
    ASSERT_TRUE(
        store->ReadRegion(1, "a", {0, 50 * 1024}, MutableBytes(out_a)).ok());
    ASSERT_TRUE(
        store->ReadRegion(1, "b", {0, 36 * 1024 + 3}, MutableBytes(out_b))
            .ok());
    EXPECT_EQ(out_a, a);
    EXPECT_EQ(out_b, b);
    EXPECT_TRUE(store->Verify(1)->ok());
  }
  StoreOptions o = SmallChunks();
  o.ingest_writers = 0;
  EXPECT_TRUE(Store::Open(dir.Sub("bad0"), o).status().IsInvalidArgument());
  o.ingest_writers = 17;
  EXPECT_TRUE(Store::Open(dir.Sub("bad17"), o).status().IsInvalidArgument());
}

// Switching the bf16 cast on and off between versions never makes a delta
// against a base of the other kind.
TEST(StoreProtocolTest, DeltasNeverCrossTheCast) {
  TempDir dir;
  StoreOptions o = SmallChunks(16 * 1024);
  o.delta_max_chain = 4;
  o.ingest_batch_bytes = 3 * 16 * 1024;  // Several pipelined batches.
  auto store = *Store::Open(dir.path(), o);
  auto w = testing::WeightLikeBytes(DType::kF32, 128 * 1024, 3);
  std::vector<std::vector<uint8_t>> saved;
  for (uint64_t v = 1; v <= 4; ++v) {
    saved.push_back(w);
    ShardData s = WholeShard("w", DType::kF32, {32 * 1024}, saved.back());
    s.cast_to_bf16 = v % 2 == 1;  // Cast, plain, cast, plain.
    SaveStats st;
    ASSERT_TRUE(store->Save({v, 0, {s}, {}}, &st).ok());
    ASSERT_TRUE(store->Commit(Commit(v)).ok());
    EXPECT_EQ(st.delta_chunks, 0u) << v;  // Each base is of the other kind.
    w = testing::StepF32(w, 1e-6f, v);
  }
  for (uint64_t v = 1; v <= 4; ++v) {
    std::vector<uint8_t> out(saved[v - 1].size());
    ASSERT_TRUE(
        store->ReadRegion(v, "w", {0, 32 * 1024}, MutableBytes(out)).ok())
        << v;
    if (v % 2 == 0) {
      EXPECT_EQ(out, saved[v - 1]) << v;
    }
    EXPECT_TRUE(store->Verify(v)->ok());
  }
}

}  // namespace
}  // namespace hy::statestore
