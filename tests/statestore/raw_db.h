// RawDb: direct RocksDB access to an hy store's column families, for tests
// that damage or measure a store below the Store API.

#ifndef HY_TESTS_STATESTORE_RAW_DB_H_
#define HY_TESTS_STATESTORE_RAW_DB_H_

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <memory>
#include <string>
#include <vector>

#include "hy/common/hash.h"

namespace hy::statestore::testing {

// Column family indices, in the order RawDb opens them.
constexpr int kChunksCf = 1, kManifestsCf = 2, kMetaCf = 3;

class RawDb {
 public:
  // Opens `path` (read-write unless `read_only`); a failure fails the test
  // and leaves ok() false.
  explicit RawDb(const std::string& path, bool read_only = false) {
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const char* n : {"default", "chunks", "manifests", "meta"}) {
      cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    }
    rocksdb::Status s =
        read_only ? rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), path,
                                                 cfs, &handles_, &db_)
                  : rocksdb::DB::Open(rocksdb::DBOptions(), path, cfs,
                                      &handles_, &db_);
    EXPECT_TRUE(s.ok()) << path << ": " << s.ToString();
  }
  ~RawDb() {
    for (auto* h : handles_) {
      db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    }
    delete db_;
  }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  bool ok() const { return db_ != nullptr; }
  rocksdb::DB* db() { return db_; }
  rocksdb::ColumnFamilyHandle* cf(int i) { return handles_[i]; }

 private:
  rocksdb::DB* db_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

// Flips a bit in the middle of the value of the chunk that is `n`th in
// key order in the store at `path` (through RocksDB, so only the chunk's
// own checksums catch it) and returns that chunk's address.
inline Hash128 DamageChunk(const std::string& path, int n) {
  RawDb raw(path);
  std::unique_ptr<rocksdb::Iterator> it(
      raw.db()->NewIterator(rocksdb::ReadOptions(), raw.cf(kChunksCf)));
  it->SeekToFirst();
  for (int i = 0; i < n && it->Valid(); ++i) it->Next();
  EXPECT_TRUE(it->Valid()) << path << " has no chunk " << n;
  if (!it->Valid()) return {};
  const std::string key = it->key().ToString();
  std::string value = it->value().ToString();
  value[value.size() / 2] ^= 0x20;
  EXPECT_TRUE(raw.db()
                  ->Put(rocksdb::WriteOptions(), raw.cf(kChunksCf), key, value)
                  .ok());
  // Keys are the epoch (8 bytes) and the address (16, canonical order).
  return Hash128::DecodeFrom(reinterpret_cast<const uint8_t*>(key.data() + 8));
}

}  // namespace hy::statestore::testing

#endif  // HY_TESTS_STATESTORE_RAW_DB_H_
