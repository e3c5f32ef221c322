// RawDb: direct RocksDB access to an hy store's column families, for tests
// that damage or measure a store below the Store API.

#ifndef HY_TESTS_STATESTORE_RAW_DB_H_
#define HY_TESTS_STATESTORE_RAW_DB_H_

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <string>
#include <vector>

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

}  // namespace hy::statestore::testing

#endif  // HY_TESTS_STATESTORE_RAW_DB_H_
