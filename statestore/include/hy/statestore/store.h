// Store: a versioned, content-addressed, crash-safe store of training state
// on RocksDB.
//
// A version is the complete training state at one step: named tensors (each
// held as shards by one or more ranks) and named blobs. Each rank saves its
// part with Save(), which cuts every shard into chunks, skips chunks whose
// content the store already holds (so an unchanged chunk is never written
// twice), encodes the rest with the chunk codec, writes them, and then writes
// the rank's manifest and its prepared record in one synced batch. A
// coordinator then calls Commit(), which succeeds only once every rank of the
// world has prepared, and makes the version visible with one synced write.
// Readers see committed versions only (and, through AdoptCommit, a part
// prepared here whose commit another store decided); anything else is a
// leftover that Gc() removes.
//
// One process opens a store read-write (RocksDB's lock enforces it); ranks
// that share a store are threads of that process (or clients of a store
// service). Ranks in different processes each own a store (one per node) and
// commit across the stores with the two-phase protocol of group_commit.h;
// see docs/architecture.md. A version a dead process left prepared but
// uncommitted is given up with Abort() before it is saved anew.
//
// Thread-safety: all methods may be called concurrently from many threads.
// Gc() waits for saves in flight and blocks new ones while it runs.

#ifndef HY_STATESTORE_STORE_H_
#define HY_STATESTORE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/result.h"
#include "hy/common/shard.h"
#include "hy/common/status.h"
#include "hy/common/tensor_meta.h"
#include "hy/statestore/codec.h"
#include "hy/statestore/manifest.h"

namespace hy::metrics {
struct HyMetrics;
}  // namespace hy::metrics

namespace hy::statestore {

inline constexpr int kStoreFormatVersion = 1;
// The largest version number a store accepts.
inline constexpr uint64_t kMaxVersion = (uint64_t{1} << 62) - 1;
// The largest delta_max_chain and chunk_bytes a store accepts.
inline constexpr int kMaxDeltaChain = 16;
inline constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 30;

struct StoreOptions {
  bool create_if_missing = true;
  bool read_only = false;
  // When set, open as a RocksDB secondary instance that follows a store
  // another process writes (read-only; Refresh() catches up). The folder
  // holds the follower's own log files.
  std::string secondary_path;
  // Shards are cut into chunks of this many bytes (a multiple of 8).
  uint64_t chunk_bytes = 4 << 20;
  // How chunks are encoded (bf16 cast is chosen per tensor, in ShardData).
  // REQUIRES: chunk_bytes <= kMaxChunkBytes.
  EncodeOptions codec;
  // A changed chunk may be stored as an XOR delta against the same region's
  // chunk in the previous committed version, when that is smaller, up to
  // this many deltas in a row (the next one is a full chunk again, so a read
  // decodes at most delta_max_chain + 1 chunks). 0 turns deltas off. Deltas
  // pay off for bf16 weights (most bits unchanged after a step), much less
  // for f32 optimizer state; each costs a decode of its base while saving.
  // REQUIRES: 0 <= delta_max_chain <= kMaxDeltaChain.
  int delta_max_chain = 0;
  // Threads for hashing, encoding, reading and decoding; 0 = four per core
  // (reads wait on the disk; more threads keep more of them in flight);
  // 1 = all of it on the calling thread.
  size_t threads = 0;
  // Raw bytes encoded per ingested SST file while saving, times
  // ingest_writers (bounds the encoded bytes held in memory at once: about
  // ingest_batch_bytes / ingest_writers * (ingest_writers + 1)).
  uint64_t ingest_batch_bytes = 256 << 20;
  // SST files a save writes and ingests at once, each on its own thread,
  // while the next batch is encoded. One writer leaves a save bound by that
  // thread's copies into the page cache; more overlap the writes with each
  // other (docs/design/statestore.md has the measurements behind the default).
  // REQUIRES: 1 <= ingest_writers <= 16.
  int ingest_writers = 2;
  // SaveAsync may hold at most this many bytes of snapshot copies; a call
  // that would exceed it waits until earlier saves drain (back-pressure).
  uint64_t staging_bytes = 1ull << 30;
  // Keep SaveAsync's snapshot buffers (up to staging_bytes, pageable and
  // page-locked together) for the next save: its copy then writes memory
  // already faulted in, at memcpy speed, instead of a fresh allocation (about
  // 10x slower for the first touch of each page). The price is that memory
  // stays allocated between saves.
  bool keep_staging = true;
  // Where saves and commits record hy_checkpoint_save_duration_seconds,
  // _commit_duration_seconds, _written_bytes_total, _logical_bytes_total
  // and _last_committed_step. Null records nothing. Must outlive the store.
  const metrics::HyMetrics* metrics = nullptr;
  // The training run this store belongs to (a run id such as torchrun's
  // TORCHELASTIC_RUN_ID; empty: no claim). A new store records it; a
  // writable store that records none adopts it; a store that records
  // another run is refused (FailedPrecondition naming both), unless
  // allow_other_run, which opens it and, when writable, records this run
  // instead. So two jobs never resume or garbage-collect each other's
  // state unless a user asks for it.
  std::string run_id;
  bool allow_other_run = false;
  // Called once per chunk address this store finds damaged (a read, a
  // read-back before reuse, Verify), with the store's path and why; the
  // chunk is then quarantined (see Store::DamagedChunks). Null: nothing is
  // said. Runs on the reading thread (possibly several at once); it must be
  // thread-safe and must not call back into the store. `metrics`, when set,
  // counts the same chunks (hy_damaged_chunks_total).
  std::function<void(const std::string& store, const Hash128& address,
                     const Status& why)>
      on_damaged_chunk = nullptr;
};

// One shard of one tensor, as a rank hands it to Save.
struct ShardData {
  TensorMeta meta;            // The global tensor.
  ShardGeometry geometry;     // Which part of it `data` is.
  ConstBytes data;            // geometry.NumElements() * DTypeSize elements.
  bool cast_to_bf16 = false;  // Store f32 data as bf16 (lossy).
  // `data` is CUDA device memory (any device this process addresses).
  // Only SaveAsync takes such a shard: it copies it to page-locked staging
  // memory on a stream of its own and returns once the copy is done (Save
  // and SaveBorrowed, which read in place on the host, refuse it).
  bool on_gpu = false;
  // Optional, for data read in place that lives in a file mapping (an
  // offloaded tensor): called with each chunk's bytes (a subspan of `data`)
  // each time the save has finished a pass over them (after hashing, and
  // again after encoding a chunk the store did not hold), so their pages
  // can be handed back as the save goes rather than all at its end. Not
  // called for data the save copied first. Runs on the store's threads,
  // several at once; it must not fail or change the bytes.
  std::function<void(ConstBytes)> after_chunk_read = nullptr;
};

struct BlobData {
  std::string name;
  int rank = kReplicatedBlob;  // kReplicatedBlob or the owning rank.
  ConstBytes data;
};

// Everything one rank saves for one version.
struct SavePart {
  uint64_t version = 0;
  int rank = 0;
  std::vector<ShardData> shards;
  std::vector<BlobData> blobs;
};

struct SaveStats {
  uint64_t logical_bytes = 0;  // Raw bytes of the part's shards.
  uint64_t chunks = 0;
  uint64_t new_chunks = 0;    // Chunks encoded and written by this save.
  uint64_t new_bytes = 0;     // Encoded bytes written by this save.
  uint64_t delta_chunks = 0;  // New chunks stored as XOR deltas.
  uint64_t stored_bytes = 0;  // Encoded bytes of all referenced chunks.
  // Chunks the store held damaged (found when read back before reuse) and
  // this save wrote again.
  uint64_t rewritten_chunks = 0;
};

struct VersionInfo {
  uint64_t version = 0;
  bool committed = false;
  bool aborted = false;       // Given up for good (see Store::Abort).
  CommitRecord commit;        // Valid when committed.
  std::vector<int> prepared;  // Ranks with a prepare record.
};

struct BadChunk {
  std::string tensor;
  int rank = 0;
  size_t index = 0;  // Chunk index within the shard.
  Hash128 address;
  Status status;  // Why it is bad (DataLoss: missing or corrupt).
};

struct VerifyReport {
  uint64_t chunks_checked = 0;
  uint64_t bytes_checked = 0;  // Raw bytes the checked chunks hold.
  // Chunks whose header was read, by chunk format version (codec.h): a
  // store written before version 2 holds version 1 chunks, and a save into
  // it adds version 2 ones.
  std::map<int, uint64_t> chunks_by_format;
  std::vector<BadChunk> bad;
  bool ok() const { return bad.empty(); }
};

struct GcOptions {
  size_t keep_last = 1;       // Newest committed versions kept.
  std::set<uint64_t> pinned;  // Also kept.
  // When set, keep_last counts only the committed versions it accepts (a
  // run's live generation, hy/recovery/retention.h); the others stay unless
  // named in `drop`.
  std::function<bool(uint64_t version)> counted = nullptr;
  // When set, the versions it accepts (committed or not) are dropped
  // whatever keep_last says, unless pinned: the caller decided they are
  // superseded.
  std::function<bool(uint64_t version)> drop = nullptr;
  // Epochs whose live bytes fall below this fraction are rewritten so the
  // dead chunks in them are reclaimed.
  double repack_below = 0.5;
};

struct GcReport {
  std::vector<uint64_t> dropped_versions;     // Committed, dropped.
  std::vector<uint64_t> dropped_uncommitted;  // Leftovers removed.
  uint64_t dropped_chunks = 0;
  uint64_t reclaimed_bytes = 0;  // Encoded bytes no longer stored.
  uint64_t repacked_bytes = 0;   // Live bytes rewritten by repacking.
};

// What Repair did.
struct RepairReport {
  uint64_t versions_checked = 0;
  uint64_t chunks_checked = 0;
  std::vector<Hash128> repaired;     // Written again from an intact copy.
  std::vector<BadChunk> unrepaired;  // No intact copy found (one per address).
};

// Where Repair takes an intact copy of a damaged chunk from: fills `out`
// (raw_length bytes, decoded and checked) or returns NotFound / DataLoss
// when it holds no intact copy.
using ChunkSource = std::function<Status(
    const Hash128& address, uint64_t raw_length, MutableBytes out)>;

class SaveHandle;
class PartWriter;

class Store {
 public:
  // Opens (or creates) the store at `path`.
  // Returns InvalidArgument if `path` holds something that is not an hy
  // store, FailedPrecondition if the store's format is newer than this
  // build reads, NotFound if it does not exist and !create_if_missing,
  // IOError (e.g. locked by another process) or DataLoss from RocksDB.
  static Result<std::unique_ptr<Store>> Open(const std::string& path,
                                             const StoreOptions& options);
  virtual ~Store();

  // Writes `part` (chunks, manifest, blobs) and the prepared record of
  // (part.version, part.rank), synced. The buffers are read during the call
  // only. Returns InvalidArgument for malformed shards (geometry that does
  // not fit, wrong data size), AlreadyExists if that rank already prepared
  // that version or it is committed, IOError from the disk.
  virtual Status Save(const SavePart& part, SaveStats* stats) = 0;

  // Like Save, but copies every buffer before it returns (waiting while the
  // staging budget is full) and encodes and writes in the background: the
  // caller may overwrite its tensors as soon as this returns. A part larger
  // than the whole staging budget is never refused: its last shards (as
  // many as fit the budget) and blobs are copied, and its first shards are
  // read in place, hashed and encoded while this call waits (a bounded
  // blocking copy: memory stays within the budget, the caller waits about
  // as long as saving the shards that did not fit takes).
  // Shards in CUDA memory (ShardData::on_gpu) are always copied, into
  // page-locked staging memory the store keeps between saves, each on the
  // calling thread's own stream; the call blocks for those copies only.
  // Returns InvalidArgument for a malformed part, Unavailable for a GPU
  // shard where no CUDA device is usable (nothing is saved); the save's
  // own errors come from the handle.
  virtual Result<std::unique_ptr<SaveHandle>> SaveAsync(SavePart part) = 0;

  // Like SaveAsync, but copies no shard and returns at once: the shards are
  // read in place in the background (blobs are copied), so the caller must
  // leave their buffers unchanged and alive until the handle's WaitRead()
  // returns; it may overwrite them then, while the writes and the sync go
  // on. For state that stays unchanged for a while anyway, such as a
  // trainer's parameters and optimizer state between two optimizer steps:
  // no copy and no staging memory, and the caller waits only if it wants
  // its buffers back before they are read. The stored version holds the
  // values the buffers have while they are read.
  // Returns InvalidArgument for a malformed part; the save's own errors
  // come from the handle.
  virtual Result<std::unique_ptr<SaveHandle>> SaveBorrowed(SavePart part) = 0;

  // A writer of (version, rank)'s part piece by piece, for a part that
  // arrives as a stream (a replica sent by another node) or is larger than
  // the memory at hand: it holds at most buffer_bytes of raw data (at least
  // one chunk) plus their encoding, and stores what Save of the whole part
  // would. The store's Gc waits while a writer lives.
  // Returns as Save: AlreadyExists if that rank prepared the version or it
  // is committed, FailedPrecondition if it was aborted or the store is
  // read-only, InvalidArgument for a bad rank or version.
  virtual Result<std::unique_ptr<PartWriter>> NewPartWriter(
      uint64_t version, int rank, uint64_t buffer_bytes) = 0;

  // Makes `commit.version` visible. REQUIRES: commit.world_size >= 1.
  // Checks the prepare records of commit.LocalRanks() (every rank of the
  // world for a shared store), that the ranks' parts agree (same dtype and
  // shape per tensor, same bytes per replicated blob) and, for a shared
  // store, that every element of every tensor is held by some rank.
  // Returns FailedPrecondition naming the ranks that have not prepared it,
  // or what does not fit; AlreadyExists if it is committed already;
  // FailedPrecondition if it was aborted.
  virtual Status Commit(const CommitRecord& commit) = 0;

  // Gives up an uncommitted version for good: writes its abort record and
  // drops its prepared records, manifests and blobs (their chunks become
  // garbage for Gc). A later Save or Commit of the version fails, so a
  // restarted process cannot mix its new parts with a dead one's.
  // Returns FailedPrecondition if the version is committed; OK if it was
  // aborted already or never saved (the record is written all the same).
  virtual Status Abort(uint64_t version) = 0;

  // For a reader: treats `commit.version`, prepared here but not
  // committed, as committed with `commit` for the life of this handle;
  // nothing is written. For a part whose coordinator decided commit (the
  // record comes from its store) while this rank died before copying the
  // decision: readers load the decided step at once instead of waiting for
  // recovery or the next save to settle it. OK if the version is committed
  // here already. Returns FailedPrecondition if it was aborted here or a
  // rank of commit.LocalRanks() has not prepared it.
  virtual Status AdoptCommit(const CommitRecord& commit) = 0;

  // Every version the store knows, committed or merely prepared, ascending.
  virtual Result<std::vector<VersionInfo>> ListVersions() = 0;

  // The newest committed version. Returns NotFound if there is none.
  virtual Result<uint64_t> LatestCommitted() = 0;

  // Returns NotFound unless `version` is committed; DataLoss if a rank's
  // part is missing or corrupt.
  virtual Result<Manifest> ReadManifest(uint64_t version) = 0;

  // Reads the elements [region.offset, region.offset + region.length) of the
  // row-major flattened tensor into `out` (region.length * dtype size
  // bytes, in the tensor's stored dtype widened back to f32 if it was cast).
  // Decodes only the chunks that overlap the region, in parallel.
  // Returns NotFound for an unknown version or tensor, InvalidArgument for a
  // region outside the tensor or a wrong-size `out`, DataLoss if a chunk is
  // missing or corrupt or no shard covers part of the region.
  virtual Status ReadRegion(uint64_t version, const std::string& tensor,
                            FlatRun region, MutableBytes out) = 0;

  // Reads one rank's shard of a tensor, as saved. Returns NotFound if that
  // rank holds none, otherwise as ReadRegion.
  virtual Status ReadShard(uint64_t version, const std::string& tensor,
                           int rank, MutableBytes out) = 0;

  // Returns NotFound for an unknown blob, DataLoss if it is damaged.
  virtual Result<std::string> ReadBlob(uint64_t version,
                                       const std::string& name,
                                       int rank = kReplicatedBlob) = 0;

  // Checks every stored byte of every chunk of a committed version (and of
  // the delta chains under them) and its blobs. A version 2 chunk is
  // checked by its checksums over the stored bytes, without decoding (what
  // a read checks too, and the header names its address); a version 1 or
  // bf16-cast chunk is decoded and checked as a read checks it. A damaged
  // chunk is quarantined as a read would.
  // Returns NotFound for an unknown version; problems with chunks are listed
  // in the report, not returned as errors.
  virtual Result<VerifyReport> Verify(uint64_t version) = 0;

  // Reads the chunk at `address` (raw_length bytes once decoded, delta
  // chain included) and checks it. Returns NotFound if the store does not
  // hold it, DataLoss if it is damaged (it is then quarantined).
  virtual Status ReadChunk(const Hash128& address, uint64_t raw_length,
                           MutableBytes out) = 0;

  // The chunks found damaged since the store was opened and not written
  // again since: no save references them without writing them anew.
  virtual std::vector<Hash128> DamagedChunks() = 0;

  // Verifies every committed version and writes each damaged chunk again,
  // as a full chunk, from the bytes `source` supplies (another copy of the
  // store, such as a replica): the chunk index then names the new copy,
  // which heals every version using it. Chunks `source` has no intact copy
  // of are listed in the report. Returns FailedPrecondition for a
  // read-only store, disk errors.
  virtual Result<RepairReport> Repair(const ChunkSource& source) = 0;

  // Drops committed versions beyond keep_last (counting only those
  // options.counted accepts, when set) and versions options.drop accepts,
  // pinned ones excepted; aborted versions, chunks no kept version
  // references, and chunk files left by saves that never prepared. In a
  // store shared by all ranks it also drops uncommitted versions older than
  // the newest kept one (their commit would have been written here). In a
  // per-rank store (group commit) it never drops a prepared version whose
  // outcome it does not know, unless options.drop accepts it: only the
  // coordinator's abort, copied here, releases it.
  virtual Result<GcReport> Gc(const GcOptions& options) = 0;

  // The path the store was opened at.
  virtual const std::string& path() const = 0;

  // The run id the store records ("" when none; see StoreOptions::run_id).
  virtual const std::string& run_id() const = 0;

  // For a store opened with secondary_path: catches up with what the
  // writing process has written since. A no-op for other stores.
  virtual Status Refresh() = 0;
};

// Waits for a SaveAsync.
// Writes one rank's part of one version shard by shard (Store::NewPartWriter).
// After an error every later call returns it and nothing is prepared.
// Thread-safety: one thread at a time.
class PartWriter {
 public:
  virtual ~PartWriter() = default;
  // Starts the next shard. Returns InvalidArgument for a name given twice,
  // a geometry that does not fit `meta`, or an unfinished previous shard.
  virtual Status BeginShard(const TensorMeta& meta,
                            const ShardGeometry& geometry,
                            bool cast_to_bf16) = 0;
  // The current shard's next bytes (read during the call only). Returns
  // InvalidArgument past the shard's end; encoding and disk errors.
  virtual Status Append(ConstBytes bytes) = 0;
  // Writes the rest, `blobs`, the manifest and the prepared record, synced.
  // Returns InvalidArgument for an unfinished shard or malformed blobs,
  // AlreadyExists if another save prepared it meanwhile, disk errors.
  virtual Status Finish(const std::vector<BlobData>& blobs,
                        SaveStats* stats) = 0;
};

class SaveHandle {
 public:
  virtual ~SaveHandle() = default;
  // Blocks until the save has finished; returns its status. Idempotent.
  virtual Status Wait(SaveStats* stats = nullptr) = 0;
  // Blocks until the save no longer reads the caller's buffers (at once
  // for SaveAsync, which copied or read them before returning; for
  // SaveBorrowed, once every new chunk of its shards is encoded, or the
  // save has failed). Idempotent; not to be called from two threads at
  // once.
  virtual void WaitRead() = 0;
  // True once Wait would not block.
  virtual bool Done() const = 0;
};

}  // namespace hy::statestore

#endif  // HY_STATESTORE_STORE_H_
