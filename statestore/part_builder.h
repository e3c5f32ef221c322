// Internal: writes one rank's part of one version into a RocksStore, its
// chunks in as many batches as the caller likes, then its manifest, blobs
// and prepared record. Store::Save hands it the whole part at once;
// PartWriter (streaming) hands it a bounded buffer at a time. Either way the
// stored part is the same: chunks cut at the same offsets, deduplicated
// against the store and each other, XOR deltas against the previous
// committed version where they pay.
//
// The caller holds the store's gc lock (shared) for the builder's life.
// Thread-safety: one thread per builder; it uses the store's thread pool.

#ifndef HY_STATESTORE_PART_BUILDER_H_
#define HY_STATESTORE_PART_BUILDER_H_

#include <rocksdb/write_batch.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "store_impl.h"

namespace hy::statestore {

// One chunk of one shard: bytes [index * chunk_bytes, + raw.size()).
struct PendingChunk {
  size_t shard = 0;  // In BeginShard order.
  size_t index = 0;  // Within the shard.
  ConstBytes raw;
  Hash128 address;  // Set by AddChunks.
};

class PartBuilder {
 public:
  PartBuilder(RocksStore* store, uint64_t version, int rank);

  // Returns AlreadyExists if (version, rank) is prepared or the version is
  // committed, FailedPrecondition if it was aborted, the store's errors.
  Status Start();

  // The next shard. `after_chunk_read` (may be null) is called as
  // ShardData::after_chunk_read says. Returns InvalidArgument for a name
  // given twice or a geometry that does not fit meta.
  Status BeginShard(const TensorMeta& meta, const ShardGeometry& geometry,
                    bool cast_to_bf16,
                    std::function<void(ConstBytes)> after_chunk_read = nullptr);

  // Hashes, deduplicates, encodes and writes `chunks`, each shard's in
  // order and after the previous call's. chunks of shards [0, borrowed)
  // are views of the caller's buffers: `release` (may be null) is called
  // once no chunk of them is read any more. Returns encoding and disk
  // errors; the builder is then unusable.
  Status AddChunks(std::vector<PendingChunk>* chunks, size_t borrowed,
                   const std::function<void()>& release);

  // Writes the manifest, `blobs` and the prepared record, synced with the
  // index entries of the new chunks, and adds the part's written and
  // logical bytes to the store's metrics. Returns InvalidArgument for a shard
  // whose chunks do not add up to its size or malformed blobs,
  // AlreadyExists if another save prepared it meanwhile, disk errors.
  Status Finish(const std::vector<BlobData>& blobs, SaveStats* stats);

 private:
  struct Shard {
    TensorMeta meta;
    ShardGeometry geometry;
    bool cast = false;  // Stored as bf16.
    uint64_t bytes = 0;
    std::function<void(ConstBytes)> after_chunk_read;  // May be null.
    std::vector<std::pair<Hash128, uint64_t>> chunks;  // Address, raw size.
  };
  // A possible XOR-delta base for a new chunk.
  struct DeltaBase {
    bool usable = false;
    ChunkRef ref;
    uint8_t depth = 0;  // Depth the new chunk would have.
  };
  using EncodedChunk = RocksStore::EncodedChunk;

  DeltaBase FindBase(const PendingChunk& c);
  Status EncodeOne(const PendingChunk& c, const DeltaBase& base,
                   EncodedChunk* out);
  // Tells c's shard that a pass over c's bytes is done.
  void DoneReading(const PendingChunk& c) const;

  RocksStore* const store_;
  const uint64_t version_;
  const int rank_;
  const std::string where_;
  std::vector<Shard> shards_;
  std::set<std::string> names_;
  std::map<Hash128, keys::ChunkLocation> known_;
  // Where the previous committed version keeps each shard, loaded once.
  std::optional<std::map<std::string, ShardEntry>> previous_;
  rocksdb::WriteBatch batch_;
  std::vector<uint64_t> epochs_;
  SaveStats stats_;
  // Encoded values already written, kept for the next batch to encode into:
  // pages a new allocation would fault in afresh (no more than were in
  // flight at once).
  std::vector<std::string> spare_;
};

}  // namespace hy::statestore

#endif  // HY_STATESTORE_PART_BUILDER_H_
