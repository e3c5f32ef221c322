// Internal: the RocksDB implementation of Store (see store.h), split over
// store.cc (open, plumbing), store_write.cc (Save), store_async.cc
// (SaveAsync), part_builder.cc (the chunk pipeline both use),
// part_writer.cc (NewPartWriter), store_commit.cc (commit, listing),
// store_read.cc (reads, Verify), store_repair.cc (Repair) and store_gc.cc
// (Gc).

#ifndef HY_STATESTORE_STORE_IMPL_H_
#define HY_STATESTORE_STORE_IMPL_H_

#include <atomic>
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "hy/common/thread_pool.h"
#include "hy/statestore/store.h"
#include "keys.h"
#include "staging_pool.h"

namespace hy::statestore {

// Returns InvalidArgument if `meta` or `geometry` is malformed or the name
// is in *names already (then adds it).
Status CheckShard(const TensorMeta& meta, const ShardGeometry& geometry,
                  std::set<std::string>* names);

// Returns InvalidArgument if `part` is malformed (shards whose geometry or
// size does not fit their tensor, names given twice, bad ranks or version).
Status CheckSavePart(const SavePart& part);

// InvalidArgument naming the first of part.shards[0, n) in CUDA memory: those
// shards would be read in place, on the host.
Status CheckHostShards(const SavePart& part, size_t n);

// Converts a RocksDB status; `what` says what was being done.
Status FromRocks(const rocksdb::Status& s, const std::string& what);

class RocksStore : public Store {
 public:
  RocksStore(std::string path, const StoreOptions& options);
  ~RocksStore() override;

  // Opens RocksDB and checks the format. Called once by Store::Open.
  Status Init();

  Status Save(const SavePart& part, SaveStats* stats) override;
  Result<std::unique_ptr<SaveHandle>> SaveAsync(SavePart part) override;
  Result<std::unique_ptr<SaveHandle>> SaveBorrowed(SavePart part) override;
  Result<std::unique_ptr<PartWriter>> NewPartWriter(
      uint64_t version, int rank, uint64_t buffer_bytes) override;
  Status Commit(const CommitRecord& commit) override;
  Status Abort(uint64_t version) override;
  Status AdoptCommit(const CommitRecord& commit) override;
  Result<std::vector<VersionInfo>> ListVersions() override;
  Result<uint64_t> LatestCommitted() override;
  Result<Manifest> ReadManifest(uint64_t version) override;
  Status ReadRegion(uint64_t version, const std::string& tensor, FlatRun region,
                    MutableBytes out) override;
  Status ReadShard(uint64_t version, const std::string& tensor, int rank,
                   MutableBytes out) override;
  Result<std::string> ReadBlob(uint64_t version, const std::string& name,
                               int rank) override;
  Result<VerifyReport> Verify(uint64_t version) override;
  Status ReadChunk(const Hash128& address, uint64_t raw_length,
                   MutableBytes out) override;
  std::vector<Hash128> DamagedChunks() override;
  Result<RepairReport> Repair(const ChunkSource& source) override;
  Result<GcReport> Gc(const GcOptions& options) override;
  const std::string& path() const override { return path_; }
  const std::string& run_id() const override { return run_id_; }
  Status Refresh() override;

 private:
  friend class PartBuilder;
  friend class BufferedPartWriter;
  struct EncodedChunk {
    Hash128 address;
    std::string value;
    uint8_t depth = 0;     // Delta chain depth; 0 for a full chunk.
    Hash128 base;          // The delta base's address when depth > 0.
    std::string encoding;  // Only set when repacking.
  };
  struct Staged;  // SaveAsync's copy of a part.
  // SaveAsync and SaveBorrowed: checks the part; part.shards[0, borrowed)
  // are read in place in the background, the rest and the blobs are copied
  // first; with `wait_read` this returns only once nothing reads the
  // borrowed shards.
  // Gives a save's staging back (budget and buffers).
  void ReleaseStaged(Staged* staged);
  Result<std::unique_ptr<SaveHandle>> StartSave(SavePart part, size_t borrowed,
                                                bool wait_read);

  bool read_only() const {
    return options_.read_only || !options_.secondary_path.empty();
  }
  Status CreateAtomically();
  // Reads the store's run id and applies options_.run_id (see StoreOptions).
  Status ClaimRun();
  // Adds to `b` the deletion of every record of `version` but its commit
  // and abort records.
  void DeleteVersionParts(rocksdb::WriteBatch* b, uint64_t version);
  // Checks that the parts of the ranks `commit` covers fit together.
  Status CheckCommittable(const CommitRecord& commit,
                          const std::vector<RankManifest>& parts);
  // Save, in parts: part.shards[0, borrowed) are views of the caller's
  // buffers, and `release` (may be null) is called once nothing reads them
  // any more: after hashing and encoding them, at the latest on return.
  Status SaveBorrowing(const SavePart& part, SaveStats* stats, size_t borrowed,
                       const std::function<void()>& release);
  Status SaveLocked(const SavePart& part, SaveStats* stats, size_t borrowed,
                    const std::function<void()>& release);
  // Writes `chunks` (any order; sorted here) as one SST and ingests it as a
  // new epoch. Sets *epoch.
  Status WriteEpoch(std::vector<EncodedChunk>* chunks, uint64_t* epoch);
  // Writes `chunks` (sorted) of `epoch` into a new SST file for ingestion.
  Status WriteSst(const std::string& file,
                  const std::vector<EncodedChunk>& chunks, uint64_t epoch);
  // Decodes the chunk `ref` into `out` (ref.raw_length bytes) and checks it
  // against its address. DataLoss if missing or corrupt.
  Status ReadChunk(const ChunkRef& ref, MutableBytes out);
  // As ReadChunk, for a chunk `level` deep in a delta chain; a DataLoss
  // quarantines the chunk (Quarantine). When `format` is given, it is set
  // to the chunk's format version once its header has been read.
  // An `out` without data scrubs instead of reading: checks every stored
  // byte of the chunk and its delta chain, decoding only what has no
  // checksum over its stored bytes alone (version 1, bf16-cast).
  Status ReadChunkAt(const Hash128& address, uint64_t raw_length,
                     MutableBytes out, int level, int* format = nullptr);
  Status ReadChunkUnchecked(const Hash128& address, uint64_t raw_length,
                            MutableBytes out, int level,
                            int* format = nullptr);
  // Records `address` as damaged (once: says so through on_damaged_chunk
  // and hy_damaged_chunks_total) and forgets that it was verified.
  void Quarantine(const Hash128& address, const Status& why);
  bool IsDamaged(const Hash128& address);
  // Whether this store wrote `address`'s chunk or read it back intact
  // since it was opened: only such a chunk may be referenced by a save
  // without being written again (content-addressed dedup trusts no chunk
  // it has not checked). Thread-safe.
  bool IsVerified(const Hash128& address);
  // Also lifts a quarantine: the chunk was written again or read intact.
  void MarkVerified(const Hash128& address);
  // Where the previous committed version before `version` keeps each
  // shard's chunks: tensor name -> its shard entry for `rank`.
  Result<std::map<std::string, ShardEntry>> PreviousShards(uint64_t version,
                                                           int rank);
  // The committed version's manifest, shared with the cache (committed
  // manifests never change). REQUIRES: gc_mu_ held.
  Result<std::shared_ptr<const Manifest>> ReadManifestLocked(uint64_t version);
  // Returns NotFound if `m` has no tensor `name`.
  static Result<const TensorEntry*> FindTensor(const Manifest& m,
                                               const std::string& name);
  Result<std::string> ReadBlobLocked(const Manifest& m, const std::string& name,
                                     int rank);
  Result<std::vector<RankManifest>> ReadRankParts(uint64_t version);
  Status DeleteEpochData(uint64_t epoch);
  // Gc's steps (store_gc.cc). An epoch's record and what of it stays live.
  struct GcEpoch;
  // Adds to `batch` the deletion of every version not in `keep` (and of
  // uncommitted ones Gc drops); returns the versions that stay.
  std::vector<uint64_t> GcDropVersions(const std::vector<VersionInfo>& versions,
                                       const std::set<uint64_t>& keep,
                                       const GcOptions& options,
                                       rocksdb::WriteBatch* batch,
                                       GcReport* report);
  // Every chunk `survivors` reference, and the delta bases they need.
  Result<std::set<Hash128>> GcMarkLive(const std::vector<uint64_t>& survivors,
                                       const std::map<Hash128,
                                                      keys::ChunkLocation>&
                                           index);
  // Every epoch record, and the chunk index.
  Status GcReadIndex(std::map<uint64_t, GcEpoch>* epochs,
                     std::map<Hash128, keys::ChunkLocation>* index);
  // Copies `epoch`'s live chunks into a new epoch and points the index at
  // it in `batch`; false (nothing done) when one of them is damaged.
  Result<bool> GcRepack(uint64_t epoch, const GcEpoch& use,
                        rocksdb::WriteBatch* batch, GcReport* report);
  Status Get(rocksdb::ColumnFamilyHandle* cf, const std::string& key,
             std::string* value);  // NotFound passes through as NotFound.
  // Every write to the DB goes through these two: a write that failed (a
  // full disk, say) leaves RocksDB refusing all later writes (its
  // background error) until DB::Resume(); the next write first resumes, so
  // that once there is room the store takes saves again.
  Status WriteSynced(rocksdb::WriteBatch* batch, const std::string& what);
  Status ResumeAfterFailedWrite(const std::string& what);
  void NoteFailedWrite(const Status& error);

  const std::string path_;
  std::atomic<bool> failed_write_{false};
  std::mutex write_error_mu_;
  Status write_error_;  // The failed write's error, while failed_write_.
  std::string run_id_;  // As recorded in the meta CF.
  const StoreOptions options_;
  rocksdb::DB* db_ = nullptr;
  rocksdb::ColumnFamilyHandle* chunks_ = nullptr;
  rocksdb::ColumnFamilyHandle* manifests_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;
  rocksdb::ColumnFamilyOptions chunk_cf_options_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;

  std::unique_ptr<ThreadPool> pool_;
  // pool_->ParallelFor, or a plain loop on the caller when options_.threads
  // is 1 (a pool always has a helper).
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
    if (options_.threads == 1) {
      for (size_t i = 0; i < n; ++i) fn(i);
    } else {
      pool_->ParallelFor(n, fn);
    }
  }

  // Saves and reads hold it shared; Gc exclusive.
  std::shared_mutex gc_mu_;
  // Serializes prepare/commit checks with their writes.
  std::mutex commit_mu_;

  std::mutex epoch_mu_;
  uint64_t next_epoch_ = 1;  // Guarded by epoch_mu_.

  std::mutex cache_mu_;
  std::map<uint64_t, std::shared_ptr<const Manifest>> manifest_cache_;
  // AdoptCommit's records, by version. Guarded by cache_mu_.
  std::map<uint64_t, CommitRecord> adopted_;

  std::mutex verified_mu_;
  std::set<Hash128> verified_;  // Guarded by verified_mu_.
  std::set<Hash128> damaged_;   // Guarded by verified_mu_.

  std::mutex staging_mu_;
  std::condition_variable staging_cv_;
  uint64_t staging_used_ = 0;  // Guarded by staging_mu_.
  // SaveAsync's snapshot memory, reused across saves: pageable for host
  // shards, page-locked for GPU shards, one budget for both.
  std::unique_ptr<StagingPool> staging_pool_;

  // Runs SaveAsync work; declared last so it drains before the rest dies.
  std::unique_ptr<ThreadPool> async_pool_;
};

}  // namespace hy::statestore

#endif  // HY_STATESTORE_STORE_IMPL_H_
