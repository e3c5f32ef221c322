// Store::NewPartWriter: a part streamed through a small buffer in odd-sized
// pieces is stored exactly as Save stores it (same chunks, deltas, stats),
// and what does not fit is refused without preparing anything.

#include <gtest/gtest.h>

#include <algorithm>

#include "codec_test_util.h"
#include "hy/statestore/store.h"
#include "store_test_util.h"

namespace hy::statestore {
namespace {

using testing::CastBuffer;
using testing::Commit;
using testing::StepF32;
using testing::TempDir;
using testing::WeightLikeBytes;

StoreOptions Options() {
  StoreOptions o = testing::SmallChunks(4096);
  o.delta_max_chain = 3;
  return o;
}

// Version v's part: an f32 tensor smaller than a chunk, a bf16 one of 5
// chunks (small steps between versions: deltas), an f32 one stored as
// bf16, and a blob.
struct Part {
  std::vector<uint8_t> small, weights, rows;
  std::string blob;
  std::vector<ShardData> shards;

  explicit Part(uint64_t v) {
    small = WeightLikeBytes(DType::kF32, 4000, 7);
    std::vector<uint8_t> f32 = WeightLikeBytes(DType::kF32, 40000, 1);
    for (uint64_t i = 1; i < v; ++i) f32 = StepF32(f32, 1e-6f, 100 + i);
    weights = CastBuffer(f32);
    rows = WeightLikeBytes(DType::kF32, 2 * 3000 * 4, 10 + v);
    blob = "state@" + std::to_string(v);
    shards.push_back(testing::WholeShard("small", DType::kF32, {1000}, small));
    shards.push_back(
        testing::WholeShard("w", DType::kBF16, {100, 100}, weights));
    shards.push_back(testing::WholeShard("rows", DType::kF32, {2, 3000}, rows));
    shards.back().cast_to_bf16 = true;
  }
  std::vector<BlobData> blobs() const {
    return {{"trainer.state", kReplicatedBlob, ConstBytes(blob)}};
  }
};

// Streams `p` through a writer of `buffer` bytes in pieces of `piece`.
Status Stream(Store* store, uint64_t v, const Part& p, uint64_t buffer,
              size_t piece, SaveStats* stats) {
  HY_ASSIGN_OR_RETURN(std::unique_ptr<PartWriter> w,
                      store->NewPartWriter(v, 0, buffer));
  for (const ShardData& s : p.shards) {
    HY_RETURN_IF_ERROR(w->BeginShard(s.meta, s.geometry, s.cast_to_bf16));
    for (size_t off = 0; off < s.data.size(); off += piece) {
      HY_RETURN_IF_ERROR(
          w->Append(s.data.subspan(off, std::min(piece, s.data.size() - off))));
    }
  }
  return w->Finish(p.blobs(), stats);
}

TEST(PartWriterTest, StreamedPartIsStoredAsSaveStoresIt) {
  TempDir a, b;
  auto saved = std::move(Store::Open(a.path(), Options())).value();
  auto streamed = std::move(Store::Open(b.path(), Options())).value();
  for (uint64_t v = 1; v <= 3; ++v) {
    const Part p(v);
    SaveStats want, got;
    ASSERT_TRUE(saved->Save({v, 0, p.shards, p.blobs()}, &want).ok());
    // A buffer of one chunk and pieces that straddle chunk and tensor ends.
    Status s = Stream(streamed.get(), v, p, 4096, 777, &got);
    ASSERT_TRUE(s.ok()) << s;
    for (Store* st : {saved.get(), streamed.get()}) {
      ASSERT_TRUE(st->Commit(Commit(v)).ok());
    }
    EXPECT_EQ(got.logical_bytes, want.logical_bytes);
    EXPECT_EQ(got.chunks, want.chunks);
    EXPECT_EQ(got.new_chunks, want.new_chunks);
    EXPECT_EQ(got.delta_chunks, want.delta_chunks);
    EXPECT_EQ(got.stored_bytes, want.stored_bytes);
    if (v > 1) {
      EXPECT_GT(got.delta_chunks, 0u) << "version " << v;
    }
    auto mw = saved->ReadManifest(v);
    auto mg = streamed->ReadManifest(v);
    ASSERT_TRUE(mw.ok() && mg.ok());
    ASSERT_EQ(mg->tensors.size(), mw->tensors.size());
    for (const auto& [name, entry] : mw->tensors) {
      const auto& other = mg->tensors.at(name).shards.at(0).chunks;
      const auto& mine = entry.shards.at(0).chunks;
      ASSERT_EQ(other.size(), mine.size()) << name;
      for (size_t i = 0; i < mine.size(); ++i) {
        EXPECT_EQ(other[i].address, mine[i].address) << name << " " << i;
        EXPECT_EQ(other[i].encoding, mine[i].encoding) << name << " " << i;
      }
    }
    for (const ShardData& sd : p.shards) {
      std::vector<uint8_t> x(sd.data.size()), y(sd.data.size());
      ASSERT_TRUE(saved->ReadShard(v, sd.meta.name, 0, MutableBytes(x)).ok());
      ASSERT_TRUE(
          streamed->ReadShard(v, sd.meta.name, 0, MutableBytes(y)).ok());
      EXPECT_EQ(x, y) << sd.meta.name;
    }
    EXPECT_EQ(*streamed->ReadBlob(v, "trainer.state", kReplicatedBlob), p.blob);
    auto report = streamed->Verify(v);
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->ok());
  }
}

TEST(PartWriterTest, WhatDoesNotFitIsRefusedAndNothingIsPrepared) {
  TempDir dir;
  auto store = std::move(Store::Open(dir.path(), Options())).value();
  const Part p(1);
  const ShardData& small = p.shards[0];
  {
    auto w = std::move(store->NewPartWriter(1, 0, 1 << 20)).value();
    EXPECT_TRUE(w->Append(small.data).IsInvalidArgument());  // No shard yet.
  }
  {
    auto w = std::move(store->NewPartWriter(1, 0, 1 << 20)).value();
    ASSERT_TRUE(w->BeginShard(small.meta, small.geometry, false).ok());
    ASSERT_TRUE(w->Append(small.data.subspan(0, 100)).ok());
    // The shard is unfinished: neither a new shard nor Finish.
    EXPECT_TRUE(w->BeginShard(p.shards[1].meta, p.shards[1].geometry, false)
                    .IsInvalidArgument());
    EXPECT_TRUE(w->Finish({}, nullptr).IsInvalidArgument());
  }
  {
    auto w = std::move(store->NewPartWriter(1, 0, 1 << 20)).value();
    ASSERT_TRUE(w->BeginShard(small.meta, small.geometry, false).ok());
    Status past = w->Append(p.weights);  // Longer than the shard.
    EXPECT_TRUE(past.IsInvalidArgument()) << past;
    EXPECT_NE(past.message().find("'small'"), std::string::npos) << past;
    EXPECT_TRUE(w->Finish({}, nullptr).IsInvalidArgument());  // Sticks.
    EXPECT_TRUE(w->BeginShard(small.meta, small.geometry, false)
                    .IsInvalidArgument());  // A name given twice.
  }
  auto versions = store->ListVersions();
  ASSERT_TRUE(versions.ok());
  EXPECT_TRUE(versions->empty());
  // A prepared (rank, version) takes no second writer.
  ASSERT_TRUE(Stream(store.get(), 1, p, 8192, 5000, nullptr).ok());
  EXPECT_EQ(store->NewPartWriter(1, 0, 8192).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_TRUE(store->NewPartWriter(1, -1, 8192).status().IsInvalidArgument());
}

}  // namespace
}  // namespace hy::statestore
