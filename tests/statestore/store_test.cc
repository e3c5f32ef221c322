#include "hy/statestore/store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <thread>

#include "store_test_util.h"

namespace hy::statestore {
namespace {

using testing::Bytes;
using testing::Commit;
using testing::SmallChunks;
using testing::TempDir;
using testing::WholeShard;

std::unique_ptr<Store> OpenOrDie(const std::string& path,
                                 const StoreOptions& o = SmallChunks()) {
  Result<std::unique_ptr<Store>> s = Store::Open(path, o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::vector<uint8_t> ReadAll(Store* store, uint64_t v, const std::string& name,
                             size_t bytes, size_t es) {
  std::vector<uint8_t> out(bytes);
  Status s = store->ReadRegion(
      v, name, FlatRun{0, static_cast<int64_t>(bytes / es)}, MutableBytes(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(StoreTest, RoundTripEveryDType) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  std::vector<std::vector<uint8_t>> data;
  SavePart part;
  part.version = 1;
  for (DType d : kAllDTypes) {
    const int64_t n = 3000 + static_cast<int64_t>(d);  // Not chunk-aligned.
    data.push_back(Bytes(n * DTypeSize(d), static_cast<uint64_t>(d)));
  }
  size_t i = 0;
  for (DType d : kAllDTypes) {
    const int64_t n = 3000 + static_cast<int64_t>(d);
    part.shards.push_back(
        WholeShard("t." + std::string(SafetensorsName(d)), d, {n}, data[i++]));
  }
  SaveStats st;
  ASSERT_TRUE(store->Save(part, &st).ok());
  EXPECT_EQ(st.new_chunks, st.chunks);
  ASSERT_TRUE(store->Commit(Commit(1)).ok());

  store.reset();  // Everything must survive a reopen.
  store = OpenOrDie(dir.path());
  i = 0;
  for (DType d : kAllDTypes) {
    EXPECT_EQ(ReadAll(store.get(), 1, "t." + std::string(SafetensorsName(d)),
                      data[i].size(), DTypeSize(d)),
              data[i])
        << SafetensorsName(d);
    ++i;
  }
  Result<Manifest> m = store->ReadManifest(1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->commit.step, 10u);
  EXPECT_EQ(m->tensors.size(), std::size(kAllDTypes));
  EXPECT_EQ(m->commit.logical_bytes, st.logical_bytes);
}

TEST(StoreTest, SubRegionsDecodeOnlyWhatTheyNeed) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  const auto w = Bytes(4 * 10000, 7);
  SavePart part{1, 0, {WholeShard("w", DType::kF32, {100, 100}, w)}, {}};
  ASSERT_TRUE(store->Save(part, nullptr).ok());
  ASSERT_TRUE(store->Commit(Commit(1)).ok());
  for (auto [off, len] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {1023, 2}, {5000, 3333}, {9999, 1}, {0, 10000}, {17, 0}}) {
    std::vector<uint8_t> out(len * 4);
    ASSERT_TRUE(store->ReadRegion(1, "w", {off, len}, MutableBytes(out)).ok());
    EXPECT_EQ(0, std::memcmp(out.data(), w.data() + off * 4, len * 4)) << off;
  }
  std::vector<uint8_t> out(8);
  EXPECT_TRUE(store->ReadRegion(1, "w", {9999, 2}, MutableBytes(out))
                  .IsInvalidArgument());
  EXPECT_TRUE(
      store->ReadRegion(1, "w", {0, 3}, MutableBytes(out)).IsInvalidArgument());
  EXPECT_TRUE(
      store->ReadRegion(1, "nope", {0, 2}, MutableBytes(out)).IsNotFound());
  EXPECT_TRUE(
      store->ReadRegion(2, "w", {0, 2}, MutableBytes(out)).IsNotFound());
}

TEST(StoreTest, IncrementalSaveWritesOnlyChangedChunks) {
  TempDir dir;
  const uint64_t kChunk = 4096;
  auto store = OpenOrDie(dir.path(), SmallChunks(kChunk));
  const size_t kChunks = 200;
  auto v1 = Bytes(kChunks * kChunk, 1);
  SaveStats s1;
  ASSERT_TRUE(
      store
          ->Save({1,
                  0,
                  {WholeShard("w", DType::kU8, {int64_t(v1.size())}, v1)},
                  {}},
                 &s1)
          .ok());
  ASSERT_TRUE(store->Commit(Commit(1)).ok());
  EXPECT_EQ(s1.new_chunks, kChunks);

  auto v2 = v1;
  std::vector<size_t> changed;
  for (size_t c = 0; c < kChunks; c += 10) {  // 10% of the chunks.
    v2[c * kChunk + 17] ^= 0x5A;
    changed.push_back(c);
  }
  SaveStats s2;
  ASSERT_TRUE(
      store
          ->Save({2,
                  0,
                  {WholeShard("w", DType::kU8, {int64_t(v2.size())}, v2)},
                  {}},
                 &s2)
          .ok());
  ASSERT_TRUE(store->Commit(Commit(2)).ok());
  EXPECT_EQ(s2.new_chunks, changed.size());
  // Random bytes store plainly: each chunk costs its size plus a header.
  EXPECT_LE(s2.new_bytes,
            changed.size() * (kChunk + ChunkHeaderSizeV2(kMaxChunkGroups)));
  EXPECT_GE(s2.new_bytes, changed.size() * kChunk);
  EXPECT_EQ(ReadAll(store.get(), 1, "w", v1.size(), 1), v1);
  EXPECT_EQ(ReadAll(store.get(), 2, "w", v2.size(), 1), v2);

  // A third save of identical data writes nothing at all.
  SaveStats s3;
  ASSERT_TRUE(
      store
          ->Save({3,
                  0,
                  {WholeShard("w", DType::kU8, {int64_t(v2.size())}, v2)},
                  {}},
                 &s3)
          .ok());
  EXPECT_EQ(s3.new_chunks, 0u);
  EXPECT_EQ(s3.new_bytes, 0u);
}

// A store written in chunk format 1 (as before format 2) takes saves in
// format 2: the new chunks are format 2, the unchanged ones stay format 1
// (deduplicated by address), every step reads back bit for bit, and Verify
// counts both.
TEST(StoreTest, ChunkFormatsMixInOneStore) {
  TempDir dir;
  const uint64_t kChunk = 4096;
  std::vector<float> w(16 * kChunk / 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * std::sin(0.37f * i);
  auto bytes = [&] {
    return std::vector<uint8_t>(reinterpret_cast<uint8_t*>(w.data()),
                                reinterpret_cast<uint8_t*>(w.data()) +
                                    w.size() * 4);
  };
  auto save = [&](Store* store, uint64_t v) {
    const auto b = bytes();
    ASSERT_TRUE(
        store
            ->Save({v,
                    0,
                    {WholeShard("w", DType::kF32, {int64_t(w.size())}, b)},
                    {}},
                   nullptr)
            .ok());
    ASSERT_TRUE(store->Commit(Commit(v)).ok());
  };
  StoreOptions old_format = SmallChunks(kChunk);
  old_format.codec.format_version = 1;
  {
    auto store = OpenOrDie(dir.path(), old_format);
    save(store.get(), 1);
    Result<VerifyReport> r = store->Verify(1);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->chunks_by_format, (std::map<int, uint64_t>{{1, 16}}));
  }
  const auto v1 = bytes();
  for (size_t i = 0; i < 4 * kChunk / 4; ++i) w[i] += 1.0f;  // 4 chunks.
  const auto v2 = bytes();
  auto store = OpenOrDie(dir.path(), SmallChunks(kChunk));
  save(store.get(), 2);
  Result<VerifyReport> r = store->Verify(2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ok());
  EXPECT_EQ(r->chunks_by_format, (std::map<int, uint64_t>{{1, 12}, {2, 4}}));
  EXPECT_EQ(ReadAll(store.get(), 1, "w", v1.size(), 4), v1);
  EXPECT_EQ(ReadAll(store.get(), 2, "w", v2.size(), 4), v2);
}

// Four ranks (threads) share one store: a [8, 6] matrix column-split in two
// (tp=2) and replicated over two dp groups, plus an FSDP-style flat tensor.
TEST(StoreTest, ShardedMultiRankVersion) {
  TempDir dir;
  auto store = OpenOrDie(dir.path(), SmallChunks(64));
  const std::vector<int64_t> shape = {8, 6};
  const auto full = Bytes(8 * 6 * 4, 11);
  const auto flat = Bytes(1000 * 2, 12);
  auto column_block = [&](int tp) {
    std::vector<uint8_t> out;
    for (int r = 0; r < 8; ++r) {
      const uint8_t* row = full.data() + (r * 6 + tp * 3) * 4;
      out.insert(out.end(), row, row + 12);
    }
    return out;
  };
  std::vector<std::vector<uint8_t>> mine(4), flat_mine(4);
  std::vector<std::thread> ranks;
  std::vector<Status> results(4);
  for (int rank = 0; rank < 4; ++rank) {
    const int tp = rank % 2;
    mine[rank] = column_block(tp);
    flat_mine[rank].assign(flat.begin() + rank * 500,
                           flat.begin() + rank * 500 + 500);
    ranks.emplace_back([&, rank, tp] {
      SavePart p;
      p.version = 5;
      p.rank = rank;
      ShardData s;
      s.meta = TensorMeta{"attn.q_proj.weight", DType::kF32, shape};
      s.geometry = ShardGeometry::FromBox(Box{{0, tp * 3}, {8, 3}});
      s.data = ConstBytes(mine[rank]);
      p.shards.push_back(s);
      ShardData f;
      f.meta = TensorMeta{"flat", DType::kBF16, {1000}};
      f.geometry = ShardGeometry::FromRuns({FlatRun{rank * 250, 250}});
      f.data = ConstBytes(flat_mine[rank]);
      p.shards.push_back(f);
      std::string rng = "rng-state-of-rank-" + std::to_string(rank);
      p.blobs.push_back({"rng", rank, ConstBytes(rng)});
      std::string cfg = "config";
      if (rank == 0)
        p.blobs.push_back({"config", kReplicatedBlob, ConstBytes(cfg)});
      results[rank] = store->Save(p, nullptr);
    });
  }
  for (auto& t : ranks) t.join();
  for (const Status& s : results) ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(store->Commit(Commit(5, 4)).ok());

  EXPECT_EQ(ReadAll(store.get(), 5, "attn.q_proj.weight", full.size(), 4),
            full);
  EXPECT_EQ(ReadAll(store.get(), 5, "flat", flat.size(), 2), flat);
  std::vector<uint8_t> region(4 * 7);  // Crosses the tp boundary.
  ASSERT_TRUE(
      store->ReadRegion(5, "attn.q_proj.weight", {14, 7}, MutableBytes(region))
          .ok());
  EXPECT_EQ(0, std::memcmp(region.data(), full.data() + 14 * 4, 28));
  std::vector<uint8_t> shard(mine[3].size());
  ASSERT_TRUE(
      store->ReadShard(5, "attn.q_proj.weight", 3, MutableBytes(shard)).ok());
  EXPECT_EQ(shard, mine[3]);
  EXPECT_EQ(*store->ReadBlob(5, "rng", 2), "rng-state-of-rank-2");
  EXPECT_EQ(*store->ReadBlob(5, "config"), "config");
  EXPECT_TRUE(store->ReadBlob(5, "rng").status().IsNotFound());
  Result<Manifest> m = store->ReadManifest(5);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->tensors.at("attn.q_proj.weight").shards.size(), 4u);
  EXPECT_EQ(m->commit.world_size, 4);
}

TEST(StoreTest, VersionWithoutEveryPrepareStaysInvisible) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  const auto a = Bytes(5000, 1), b = Bytes(5000, 2);
  auto part = [&](uint64_t v, int rank, const std::vector<uint8_t>& d) {
    SavePart p;
    p.version = v;
    p.rank = rank;
    ShardData s;
    s.meta = TensorMeta{"w", DType::kU8, {10000}};
    s.geometry = ShardGeometry::FromRuns({FlatRun{rank * 5000, 5000}});
    s.data = ConstBytes(d);
    p.shards.push_back(s);
    return p;
  };
  ASSERT_TRUE(store->Save(part(1, 0, a), nullptr).ok());
  ASSERT_TRUE(store->Save(part(1, 1, b), nullptr).ok());
  ASSERT_TRUE(store->Commit(Commit(1, 2)).ok());
  ASSERT_TRUE(store->Save(part(2, 0, b), nullptr).ok());  // Rank 1 never does.
  Status s = store->Commit(Commit(2, 2));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("ranks not prepared: 1"), std::string_view::npos);
  EXPECT_TRUE(store->ReadManifest(2).status().IsNotFound());
  EXPECT_EQ(*store->LatestCommitted(), 1u);
  auto versions = *store->ListVersions();
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_TRUE(versions[0].committed);
  EXPECT_FALSE(versions[1].committed);
  EXPECT_EQ(versions[1].prepared, std::vector<int>{0});

  EXPECT_EQ(store->Save(part(2, 0, b), nullptr).code(),
            StatusCode::kAlreadyExists);
  ASSERT_TRUE(store->Save(part(2, 1, a), nullptr).ok());
  ASSERT_TRUE(store->Commit(Commit(2, 2)).ok());
  EXPECT_EQ(store->Commit(Commit(2, 2)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*store->LatestCommitted(), 2u);
}

TEST(StoreTest, SaveAsyncSnapshotsBuffersAtCallTime) {
  TempDir dir;
  StoreOptions o = SmallChunks();
  o.staging_bytes = 3 * 40000;  // Room for three saves at a time.
  auto store = OpenOrDie(dir.path(), o);
  std::vector<uint8_t> live = Bytes(40000, 3);
  std::vector<std::vector<uint8_t>> expected;
  std::vector<std::unique_ptr<SaveHandle>> handles;
  for (uint64_t v = 1; v <= 6; ++v) {
    expected.push_back(live);
    SavePart p{v, 0, {WholeShard("w", DType::kF32, {10000}, live)}, {}};
    auto h = store->SaveAsync(std::move(p));
    ASSERT_TRUE(h.ok()) << h.status();
    handles.push_back(std::move(h).value());
    // The training step mutates the tensor right away.
    for (size_t i = 0; i < live.size(); i += 7)
      live[i] ^= static_cast<uint8_t>(v);
  }
  for (uint64_t v = 1; v <= 6; ++v) {
    SaveStats st;
    ASSERT_TRUE(handles[v - 1]->Wait(&st).ok());
    EXPECT_TRUE(handles[v - 1]->Done());
    EXPECT_EQ(st.logical_bytes, 40000u);
    ASSERT_TRUE(store->Commit(Commit(v)).ok());
    EXPECT_EQ(ReadAll(store.get(), v, "w", 40000, 4), expected[v - 1]) << v;
  }
  // A part larger than the whole budget is never refused: its first shards
  // are read in place while SaveAsync waits, the rest is copied. Whatever
  // the caller does to its buffers after the return, the version holds the
  // values at call time.
  std::vector<std::vector<uint8_t>> big;
  SavePart part{9, 0, {}, {}};
  for (int i = 0; i < 5; ++i) {  // 5 x 40000 bytes, budget 120000.
    big.push_back(Bytes(40000, 20 + i));
  }
  for (int i = 0; i < 5; ++i) {
    part.shards.push_back(
        WholeShard("big" + std::to_string(i), DType::kF32, {10000}, big[i]));
  }
  const auto at_call = big;
  auto h = store->SaveAsync(std::move(part));
  ASSERT_TRUE(h.ok()) << h.status();
  for (auto& b : big) b.assign(b.size(), 0);  // Reused at once.
  SaveStats st;
  ASSERT_TRUE((*h)->Wait(&st).ok());
  EXPECT_EQ(st.logical_bytes, 200000u);
  ASSERT_TRUE(store->Commit(Commit(9)).ok());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(ReadAll(store.get(), 9, "big" + std::to_string(i), 40000, 4),
              at_call[i])
        << i;
  }
  // One shard alone larger than the budget: read in place, too.
  std::vector<uint8_t> huge = Bytes(o.staging_bytes + 8, 9);
  const std::vector<uint8_t> huge_at_call = huge;
  auto one = store->SaveAsync(
      {10, 0, {WholeShard("w", DType::kU8, {int64_t(huge.size())}, huge)}, {}});
  ASSERT_TRUE(one.ok()) << one.status();
  huge.assign(huge.size(), 1);
  ASSERT_TRUE((*one)->Wait(nullptr).ok());
  ASSERT_TRUE(store->Commit(Commit(10)).ok());
  EXPECT_EQ(ReadAll(store.get(), 10, "w", huge.size(), 1), huge_at_call);
}

TEST(StoreTest, RejectsMalformedSaves) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  const auto d = Bytes(400, 1);
  SavePart p{
      1, 0, {WholeShard("w", DType::kF32, {101}, d)}, {}};  // 404 needed.
  EXPECT_TRUE(store->Save(p, nullptr).IsInvalidArgument());
  p.shards[0] = WholeShard("w", DType::kF32, {100}, d);
  p.shards[0].geometry = ShardGeometry::FromBox(Box{{50}, {100}});  // Too far.
  EXPECT_TRUE(store->Save(p, nullptr).IsInvalidArgument());
  p.shards[0] = WholeShard("w", DType::kF32, {100}, d);
  p.shards.push_back(p.shards[0]);  // Same tensor twice.
  EXPECT_TRUE(store->Save(p, nullptr).IsInvalidArgument());
  EXPECT_TRUE(store->Commit(Commit(1)).code() ==
              StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace hy::statestore
