// Damaged stores: every kind of damage is reported as a clear error, never a
// crash or wrong bytes. Damage is done through RocksDB itself (or to whole
// files), not by guessing offsets inside files.

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <filesystem>
#include <fstream>

#include "codec_test_util.h"
#include "hy/statestore/codec.h"
#include "hy/statestore/store.h"
#include "raw_db.h"
#include "store_test_util.h"

namespace hy::statestore {
namespace {

using testing::Bytes;
using testing::Commit;
using testing::kChunksCf;
using testing::kManifestsCf;
using testing::kMetaCf;
using testing::RawDb;
using testing::SmallChunks;
using testing::TempDir;
using testing::WholeShard;

void SaveOne(const std::string& path, const std::vector<uint8_t>& data) {
  auto store = *Store::Open(path, SmallChunks());
  ASSERT_TRUE(store
                  ->Save({1,
                          0,
                          {WholeShard("w", DType::kF32,
                                      {int64_t(data.size() / 4)}, data)},
                          {}},
                         nullptr)
                  .ok());
  ASSERT_TRUE(store->Commit(Commit(1)).ok());
}

TEST(StoreCorruptionTest, FlippedByteInOneChunkIsReportedExactly) {
  TempDir dir;
  const auto data = Bytes(4096 * 20, 5);
  SaveOne(dir.path(), data);
  std::string victim_key;
  {
    RawDb raw(dir.path());
    std::unique_ptr<rocksdb::Iterator> it(
        raw.db()->NewIterator(rocksdb::ReadOptions(), raw.cf(kChunksCf)));
    it->SeekToFirst();
    for (int i = 0; i < 7 && it->Valid(); ++i) it->Next();  // The 8th chunk.
    ASSERT_TRUE(it->Valid());
    victim_key = it->key().ToString();
    std::string value = it->value().ToString();
    value[value.size() / 2] ^= 0x20;
    ASSERT_TRUE(
        raw.db()
            ->Put(rocksdb::WriteOptions(), raw.cf(kChunksCf), victim_key, value)
            .ok());
  }
  auto store = *Store::Open(dir.path(), SmallChunks());
  Result<VerifyReport> report = store->Verify(1);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->chunks_checked, 20u);
  ASSERT_EQ(report->bad.size(), 1u);
  const Hash128 victim = Hash128::DecodeFrom(
      reinterpret_cast<const uint8_t*>(victim_key.data() + 8));
  EXPECT_EQ(report->bad[0].address, victim);
  EXPECT_EQ(report->bad[0].tensor, "w");
  EXPECT_TRUE(report->bad[0].status.IsDataLoss()) << report->bad[0].status;
  std::vector<uint8_t> out(data.size());
  Status s = store->ReadRegion(1, "w", {0, int64_t(data.size() / 4)},
                               MutableBytes(out));
  EXPECT_TRUE(s.IsDataLoss()) << s;
  // The chunks that are intact still read back.
  std::vector<uint8_t> first(4096);
  ASSERT_TRUE(store->ReadRegion(1, "w", {0, 1024}, MutableBytes(first)).ok());
  EXPECT_EQ(0, std::memcmp(first.data(), data.data(), 4096));
}

// Verify checks a version 2 chunk by its checksums over the stored bytes,
// without decoding it: a flipped bit anywhere in it (header, a zstd group,
// a raw group, the last byte) is still found, and names that chunk.
TEST(StoreCorruptionTest, VerifyFindsAFlipAnywhereInAChunkItDoesNotDecode) {
  TempDir dir;
  const auto data = testing::WeightLikeBytes(DType::kF32, 4096 * 4, 3);
  SaveOne(dir.path(), data);
  std::string key, value;
  {
    RawDb raw(dir.path());
    std::unique_ptr<rocksdb::Iterator> it(
        raw.db()->NewIterator(rocksdb::ReadOptions(), raw.cf(kChunksCf)));
    it->SeekToFirst();
    ASSERT_TRUE(it->Valid());
    key = it->key().ToString();
    value = it->value().ToString();
  }
  Result<ChunkHeader> h = ParseChunkHeader(ConstBytes(value));
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->version, 2);
  bool zstd = false, raw_group = false;
  for (int g = 0; g < h->group_count; ++g) {
    zstd |= h->groups[g].codec == GroupCodec::kZstd;
    raw_group |= h->groups[g].codec == GroupCodec::kRaw;
  }
  ASSERT_TRUE(zstd && raw_group) << "want both kinds of group to flip in";
  const size_t n = value.size();
  const size_t head = h->header_length;
  for (size_t at : std::vector<size_t>{0, 9, 40, head - 1, head, head + 7,
                                       n / 3, n / 2, n * 3 / 4, n - 1}) {
    std::string bad = value;
    bad[at] ^= 0x01;
    {
      RawDb raw(dir.path());
      ASSERT_TRUE(raw.db()
                      ->Put(rocksdb::WriteOptions(), raw.cf(kChunksCf), key,
                            bad)
                      .ok());
    }
    auto store = *Store::Open(dir.path(), SmallChunks());
    Result<VerifyReport> report = store->Verify(1);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_EQ(report->bad.size(), 1u) << "byte " << at << " of " << n;
    EXPECT_TRUE(report->bad[0].status.IsDataLoss()) << report->bad[0].status;
  }
}

// Dedup trusts no chunk it has not checked: a later save (another process,
// so nothing is known verified) that would reference a damaged chunk reads
// it back, finds the damage and writes it again; every version using it is
// whole again.
TEST(StoreCorruptionTest, SaveRewritesADamagedChunkItWouldReuse) {
  TempDir dir;
  const auto data = Bytes(4096 * 20, 5);
  SaveOne(dir.path(), data);
  {
    RawDb raw(dir.path());
    std::unique_ptr<rocksdb::Iterator> it(
        raw.db()->NewIterator(rocksdb::ReadOptions(), raw.cf(kChunksCf)));
    it->SeekToFirst();
    for (int i = 0; i < 3 && it->Valid(); ++i) it->Next();
    ASSERT_TRUE(it->Valid());
    std::string value = it->value().ToString();
    value[value.size() / 2] ^= 0x20;
    ASSERT_TRUE(raw.db()
                    ->Put(rocksdb::WriteOptions(), raw.cf(kChunksCf),
                          it->key().ToString(), value)
                    .ok());
  }
  auto store = *Store::Open(dir.path(), SmallChunks());
  ASSERT_EQ(store->Verify(1)->bad.size(), 1u);
  SaveStats stats;
  ASSERT_TRUE(store
                  ->Save({2,
                          0,
                          {WholeShard("w", DType::kF32,
                                      {int64_t(data.size() / 4)}, data)},
                          {}},
                         &stats)
                  .ok());
  ASSERT_TRUE(store->Commit(Commit(2)).ok());
  EXPECT_EQ(stats.rewritten_chunks, 1u);
  EXPECT_EQ(stats.new_chunks, 1u);  // Only the damaged one: 19 deduped.
  EXPECT_TRUE(store->Verify(1)->bad.empty());
  EXPECT_TRUE(store->Verify(2)->bad.empty());
  std::vector<uint8_t> out(data.size());
  ASSERT_TRUE(store->ReadRegion(1, "w", {0, int64_t(data.size() / 4)},
                                MutableBytes(out))
                  .ok());
  EXPECT_EQ(out, data);
  // Within one store, chunks it wrote or read back are reused unread.
  SaveStats again;
  ASSERT_TRUE(store
                  ->Save({3,
                          0,
                          {WholeShard("w", DType::kF32,
                                      {int64_t(data.size() / 4)}, data)},
                          {}},
                         &again)
                  .ok());
  EXPECT_EQ(again.new_chunks, 0u);
  EXPECT_EQ(again.rewritten_chunks, 0u);
}

TEST(StoreCorruptionTest, MissingChunkAndBadManifestAreDataLoss) {
  TempDir dir;
  const auto data = Bytes(4096 * 4, 6);
  SaveOne(dir.path(), data);
  {
    RawDb raw(dir.path());
    std::unique_ptr<rocksdb::Iterator> it(
        raw.db()->NewIterator(rocksdb::ReadOptions(), raw.cf(kMetaCf)));
    it->Seek("a");
    ASSERT_TRUE(it->Valid());
    ASSERT_TRUE(
        raw.db()
            ->Delete(rocksdb::WriteOptions(), raw.cf(kMetaCf), it->key())
            .ok());
  }
  {
    auto store = *Store::Open(dir.path(), SmallChunks());
    Result<VerifyReport> r = store->Verify(1);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->bad.size(), 1u);
    EXPECT_NE(r->bad[0].status.message().find("missing"),
              std::string_view::npos);
  }
  {
    RawDb raw(dir.path());
    std::unique_ptr<rocksdb::Iterator> it(
        raw.db()->NewIterator(rocksdb::ReadOptions(), raw.cf(kManifestsCf)));
    it->Seek("m");
    ASSERT_TRUE(it->Valid());
    std::string json = it->value().ToString();
    const size_t at = json.find("\"F32\"");
    ASSERT_NE(at, std::string::npos);
    json.replace(at, 5, "\"F8_E9\"");
    ASSERT_TRUE(raw.db()
                    ->Put(rocksdb::WriteOptions(), raw.cf(kManifestsCf),
                          it->key(), json)
                    .ok());
  }
  auto store = *Store::Open(dir.path(), SmallChunks());
  Status s = store->ReadManifest(1).status();
  EXPECT_TRUE(s.IsDataLoss()) << s;
  EXPECT_NE(s.message().find("F8_E9"), std::string_view::npos) << s;
}

TEST(StoreCorruptionTest, OpenRefusesWhatIsNotAStore) {
  TempDir dir;
  std::filesystem::create_directories(dir.Sub("junk"));
  std::ofstream(dir.Sub("junk/file.txt")) << "hello";
  auto r = Store::Open(dir.Sub("junk"), SmallChunks());
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status();

  {
    rocksdb::DB* db = nullptr;
    rocksdb::Options o;
    o.create_if_missing = true;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir.Sub("plain"), &db).ok());
    delete db;
  }
  r = Store::Open(dir.Sub("plain"), SmallChunks());
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status();
  EXPECT_NE(r.status().message().find("not an hy store"),
            std::string_view::npos);

  StoreOptions ro = SmallChunks();
  ro.read_only = true;
  EXPECT_TRUE(Store::Open(dir.Sub("absent"), ro).status().IsNotFound());

  SaveOne(dir.Sub("newer"), Bytes(64, 1));
  {
    RawDb raw(dir.Sub("newer"));
    ASSERT_TRUE(
        raw.db()
            ->Put(rocksdb::WriteOptions(), raw.cf(kMetaCf), "format", "2")
            .ok());
  }
  r = Store::Open(dir.Sub("newer"), SmallChunks());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("format 2"), std::string_view::npos);

  SaveOne(dir.Sub("locked"), Bytes(64, 1));
  auto first = Store::Open(dir.Sub("locked"), SmallChunks());
  ASSERT_TRUE(first.ok());
  auto second = Store::Open(dir.Sub("locked"), SmallChunks());
  EXPECT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kIOError) << second.status();
}

TEST(StoreCorruptionTest, TruncatedFilesGiveErrorsNotCrashes) {
  TempDir dir;
  const auto data = Bytes(4096 * 30, 8);
  SaveOne(dir.path(), data);
  int truncated = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    if (e.path().extension() == ".sst") {
      std::filesystem::resize_file(e.path(),
                                   std::filesystem::file_size(e.path()) / 2);
      ++truncated;
    }
  }
  ASSERT_GT(truncated, 0);
  auto store = Store::Open(dir.path(), SmallChunks());
  if (!store.ok()) {
    EXPECT_FALSE(store.status().message().empty());
    return;  // A clear error at open is a right answer.
  }
  std::vector<uint8_t> out(data.size());
  Status s = (*store)->ReadRegion(1, "w", {0, int64_t(data.size() / 4)},
                                  MutableBytes(out));
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.IsDataLoss() || s.code() == StatusCode::kIOError) << s;
  Result<VerifyReport> r = (*store)->Verify(1);
  EXPECT_TRUE(!r.ok() || !r->ok());
}

}  // namespace
}  // namespace hy::statestore
