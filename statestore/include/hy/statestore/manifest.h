// The records that describe a version in a store: what each rank wrote
// (RankManifest, its "prepared" part), what the coordinator committed
// (CommitRecord), and the merged view readers use (Manifest).
//
// Records are stored as JSON (see docs/design/statestore.md for the exact
// fields): readable with `ldb`, and parsed strictly, so a damaged or foreign
// record is a DataLoss, never a crash or a silently wrong tensor.
//
// Thread-safety: plain values.

#ifndef HY_STATESTORE_MANIFEST_H_
#define HY_STATESTORE_MANIFEST_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/hash.h"
#include "hy/common/result.h"
#include "hy/common/shard.h"
#include "hy/common/tensor_meta.h"

namespace hy::statestore {

inline constexpr int kReplicatedBlob = -1;

// One stored chunk of a shard: the shard's local bytes
// [index * chunk_bytes, index * chunk_bytes + raw_length).
struct ChunkRef {
  // ContentHash of the raw chunk bytes: the chunk's key, and the checksum a
  // read checks the decoded bytes against.
  Hash128 address;
  uint64_t raw_length = 0;     // Bytes the chunk decodes to.
  uint64_t stored_length = 0;  // Encoded bytes in the store.
  std::string encoding;        // EncodingName, e.g. "split+zstd".
};

// The piece of a tensor one rank holds, cut into chunks.
struct ShardEntry {
  int rank = 0;
  ShardGeometry geometry;
  uint64_t chunk_bytes = 0;  // Every chunk but the last has this length.
  std::vector<ChunkRef> chunks;
};

struct TensorEntry {
  TensorMeta meta;
  std::vector<ShardEntry> shards;
};

// A named opaque blob (RNG state, data-loader cursor, config, ...).
struct BlobEntry {
  std::string name;
  int rank = kReplicatedBlob;  // kReplicatedBlob, or the rank it belongs to.
  uint64_t size = 0;
  Hash128 hash;  // ContentHash of the bytes.
};

// What one rank wrote for one version: its prepare record.
struct RankManifest {
  uint64_t version = 0;
  int rank = 0;
  std::vector<TensorEntry> tensors;  // Only this rank's shards.
  std::vector<BlobEntry> blobs;
  uint64_t logical_bytes = 0;  // Raw bytes of all shards.
  uint64_t stored_bytes = 0;   // Encoded bytes of all referenced chunks.
  uint64_t new_bytes = 0;      // Encoded bytes this save actually wrote.
};

// Written by the coordinator, last: makes a version visible.
struct CommitRecord {
  // The ranks a store must hold parts of for this record: `ranks`, or all
  // of [0, world_size) when `ranks` is empty.
  std::vector<int> LocalRanks() const;

  uint64_t version = 0;
  uint64_t step = 0;
  int world_size = 1;
  // The ranks whose parts this store holds: empty means every rank of the
  // world (one store shared by all ranks); {k} for rank k's own store when
  // each process keeps its own (see group_commit.h).
  std::vector<int> ranks;
  std::string layout;        // Layout spec string, e.g. "fsdp=4".
  std::string model_rules;   // How tensors are split (opaque here).
  int64_t wall_time_ms = 0;  // Unix time of the commit.
  uint64_t logical_bytes = 0;
  uint64_t stored_bytes = 0;
  uint64_t new_bytes = 0;
};

// A committed version as readers see it: every rank's shards merged per
// tensor (shards in rank order).
struct Manifest {
  CommitRecord commit;
  std::map<std::string, TensorEntry> tensors;
  std::vector<BlobEntry> blobs;
};

std::string EncodeRankManifest(const RankManifest& m);
// Returns DataLoss if `json` is not a well-formed rank manifest (bad JSON,
// missing fields, unknown dtype, invalid geometry, chunk lengths that do not
// add up to the shard's bytes).
Result<RankManifest> DecodeRankManifest(std::string_view json);

std::string EncodeCommitRecord(const CommitRecord& c);
// Returns DataLoss if `json` is not a well-formed commit record.
Result<CommitRecord> DecodeCommitRecord(std::string_view json);

// Merges rank manifests into `out->tensors` / `out->blobs`. Returns DataLoss
// if two ranks disagree on a tensor's dtype or shape.
Status MergeRankManifest(const RankManifest& part, Manifest* out);

}  // namespace hy::statestore

#endif  // HY_STATESTORE_MANIFEST_H_
