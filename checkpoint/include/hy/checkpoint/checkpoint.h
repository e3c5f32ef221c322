// hy::checkpoint: the state-consistency manager of a training job, above
// hy::recovery and below the trainer (hy's trainer uses it; so do hyctl's
// run commands and the Python package, without any trainer code).
//
// Checkpointer: a job's way into hy::statestore. Each rank owns one
// store, its slot's primary store on the node it runs on,
// <root>/node-<k>/store[-<slot>] (hy/recovery/node_layout.h; RocksDB allows
// one writer per store), and a version is committed across the ranks'
// stores with a two-phase protocol: rank 0 is the coordinator, its store
// decides. With a transport (the normal case, and the only one that works
// across hosts) the decision goes over it (hy/recovery/transport_commit.h);
// without one, through the filesystem (statestore/group_commit.h: one
// shared filesystem). With replicas, each committed part is then copied to
// other nodes (hy/recovery/replicator.h) and the step counts as committed
// only once every copy is durable.
//
// Saving: Save() copies the rank's shards (Store::SaveAsync), so the caller
// may update its tensors as soon as it returns (or, with read_in_place,
// reads them where they are: the caller updates them after WaitRead()),
// and a background thread
// then waits for the save, and runs the commit, then Gc. Training goes on
// meanwhile; at most one checkpoint is in flight per rank (Save waits for the
// previous one). The version number is recovery::MakeVersion(step, generation):
// one generation per start of the job, so a restarted job never reuses a
// version a dead one left behind.
//
// Crashes: a run that died mid-checkpoint leaves versions prepared but not
// committed. Open() gives them up (rank 0 aborts them; the others copy the
// decision). The store never takes a new save of an aborted version (so a
// dead run's parts are never mixed with new ones), and the version is the
// step, so saving that step again fails on every rank (status() says so)
// and the next step's checkpoint commits as usual.
//
// Loading (resume, any world size): CheckpointReader scans every store under
// the root (primaries and replicas, hy/recovery/catalog.h), takes the newest
// version with a committed copy of every old rank's part, and opens those
// copies read-only; ReadRegion then
// reads any region of any tensor from whichever old stores hold it, so a
// rank of the new world assembles its new shard whatever the old layout
// was. Read-only opens work while a new run's Checkpointer writes the same
// stores.
//
// Thread-safety: one thread calls Save / Wait on a Checkpointer (its
// background thread is internal); status() may be called from any thread.
// CheckpointReader's methods may be called concurrently.

#ifndef HY_CHECKPOINT_CHECKPOINT_H_
#define HY_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/result.h"
#include "hy/common/shard.h"
#include "hy/statestore/store.h"

namespace hy::reshard {
class Transport;
}
namespace hy::metrics {
enum class CheckpointFailureCause;  // hy/metrics/hy_metrics.h
}

namespace hy::checkpoint {

struct CheckpointOptions {
  std::string root;  // Holds node-<k>/ per node.
  int rank = 0;
  int world_size = 1;
  // Node id of each rank; empty: rank r runs on node r.
  std::vector<int> nodes;
  uint32_t generation = 0;  // Of this start of the job (see above).
  // A transport of the checkpoint thread's own: the commit decision and the
  // replicas go over it. Null: commit through the filesystem, no replicas.
  reshard::Transport* transport = nullptr;
  // Copies of each part on other nodes (0: none).
  int replicas = 0;
  // Gc after each commit keeps this many versions of this generation.
  int keep_last = 2;
  // Keep versions of earlier generations (see recovery/retention.h): no
  // superseding, no sweep of stale stores.
  bool keep_superseded = false;
  // Without a transport: how long rank 0 waits for every rank to prepare
  // before it aborts the version. Followers wait twice as long for rank 0's
  // decision, so they learn of an abort rather than give up just before it.
  // (With one, the transport's own timeout applies.)
  int64_t commit_timeout_ms = 60000;
  uint64_t chunk_bytes = 4 << 20;  // StoreOptions::chunk_bytes.
  // StoreOptions::staging_bytes (0: the store's default, 1 GiB): of a part
  // larger than this, what does not fit is read in place before Save
  // returns (training waits; hy_checkpoint_blocking_seconds shows it).
  // When set it also bounds the raw bytes encoded per ingested batch
  // (StoreOptions::ingest_batch_bytes, 256 MiB otherwise), the holders'
  // replication buffers (ReplicatorOptions::piece_bytes) and, below
  // 16 MiB, the replication messages (ReplicatorOptions::message_bytes).
  uint64_t staging_bytes = 0;
  // Save reads the shards in place in the background instead of copying
  // them (Store::SaveBorrowed): the caller leaves them unchanged until
  // WaitRead(), e.g. from one optimizer step to the next. Blobs are copied
  // either way.
  bool read_in_place = false;
  const metrics::HyMetrics* metrics = nullptr;  // Not owned; may be null.
  // Recorded in every store it writes (primary and replicas); a store of
  // another run is refused (hy/recovery/run_identity.h). "": none.
  std::string run_id;
  // Told, from the checkpoint thread, of a damaged chunk found in a store
  // this rank writes (one line naming the store and the chunk; it is
  // quarantined and written again). Null: not told.
  std::function<void(const std::string& line)> log_damage = nullptr;
};

// The store of rank `rank` under `root`, by `nodes` (empty: rank r on node
// r): recovery::PrimaryStorePath of its node and slot.
std::string RankStorePath(const std::string& root, int rank,
                          const std::vector<int>& nodes = {});

// The state of the newest checkpoint as the training loop reports it.
struct CheckpointStatus {
  int64_t committed_step = -1;  // Newest committed by this rank; -1 none.
  int64_t in_flight_step = -1;  // Saving or committing; -1 none.
  Status last_error;            // Of the newest finished checkpoint.
  // Of the newest committed checkpoint: seconds from Save's call to its
  // commit (and replication, when configured); 0 none yet.
  double last_durable_seconds = 0;
  // Checkpoints that failed (not saved, not committed, or committed but
  // not fully replicated) since Open; of them, those since the newest that
  // succeeded; and the newest failed step (-1: none).
  uint64_t failures = 0;
  int consecutive_failures = 0;
  int64_t failed_step = -1;
};

// Why a checkpoint failed, from its error (the coordinator's error quotes
// the ranks' own, so the text is read too): a full disk or quota
// (no_space) before any other write error (io), a rank that did not answer
// (peer), else other. Also counted, per failure, in
// hy_checkpoint_failures_total{cause}.
metrics::CheckpointFailureCause FailureCause(const Status& error);

class Checkpointer {
 public:
  // Opens (creating) this rank's store. Gives up versions a dead run left
  // prepared but uncommitted (rank 0 aborts them; the others follow the
  // coordinator's decision, waiting at most a second each, and leave a
  // version whose outcome is still unknown). Returns InvalidArgument for
  // bad options (rank outside [0, world_size), keep_last < 1, timeout <= 0,
  // empty root), otherwise the store's errors.
  static Result<std::unique_ptr<Checkpointer>> Open(
      const CheckpointOptions& options);
  ~Checkpointer();  // Waits for the checkpoint in flight.

  // Starts checkpoint `step`: copies the data of `shards` and `blobs`
  // before returning (with read_in_place, only the blobs: the shards must
  // stay unchanged until WaitRead() returns); the commit record carries
  // `layout` and `rules` (rank 0's are the ones recorded). Waits first for
  // the previous checkpoint.
  // Returns InvalidArgument for malformed shards or blobs (and a step
  // beyond statestore::kMaxVersion); errors of the checkpoint itself
  // (saving, committing, an aborted step) are reported in status() and
  // Wait(), not here. `after_read`, if set, runs on the checkpoint's
  // thread once the part is saved (its shards read), before the commit: to
  // let go of what reading them brought in, say. It must be safe to run
  // beside the caller.
  Status Save(uint64_t step, std::vector<statestore::ShardData> shards,
              std::vector<statestore::BlobData> blobs,
              const std::string& layout, const std::string& rules,
              std::function<void()> after_read = nullptr);

  // Blocks until the checkpoint in flight no longer reads the shards Save
  // was given (at once without read_in_place, or if none is in flight).
  // Its errors come from status() and Wait().
  void WaitRead();

  // Non-blocking.
  CheckpointStatus status() const;

  // Blocks until the checkpoint in flight (if any) is committed or failed;
  // returns its status (that of the newest finished checkpoint if none is
  // in flight; OK if there was none). On rank 0, Unavailable when some rank
  // did not prepare in time (the version is then aborted); on the others,
  // Aborted when rank 0 gave the version up, Unavailable when it decided
  // nothing in time.
  Status Wait();

  // The newest step committed in any store under `root`, or NotFound if
  // none (or no store there yet).
  static Result<uint64_t> LatestCommittedStep(const std::string& root);

 private:
  struct Impl;
  explicit Checkpointer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A committed version of a run, opened for reading by any rank of any new
// world size.
class CheckpointReader {
 public:
  // Opens the newest version under `root` (or of `step` if >= 0) that some
  // store committed and whose every old rank's part has a committed copy
  // (primary or replica); the copies are opened read-only. Returns NotFound
  // if there is no store under `root`, nothing is committed, or `step` is
  // not committed; DataLoss if an old rank's part has no copy or its
  // shards contradict another rank's. A part that is prepared but not
  // committed in its own store is read all the same when another store
  // holds the version's commit record: the coordinator decided commit and
  // that rank died before copying the decision (Store::AdoptCommit; nothing
  // is written). A version no store committed is never read.
  // With generation >= 0, only versions that start of the job wrote count.
  // Stores of two runs under `root` (recovery::RecordedRunId: another job's
  // node directory copied in) are refused with FailedPrecondition naming
  // both run ids, unless allow_other_run.
  static Result<std::unique_ptr<CheckpointReader>> Open(
      const std::string& root, int64_t step = -1, int64_t generation = -1,
      bool allow_other_run = false);
  ~CheckpointReader();

  uint64_t step() const;
  const statestore::CommitRecord& commit() const;  // Rank 0's record.

  // Reads elements [region.offset, region.end()) of the flattened tensor,
  // assembling them from the old ranks' shards. A copy with a damaged chunk
  // (DataLoss) is dropped for another committed copy of the same part, a
  // primary before replicas (fallbacks() says which). Returns NotFound for
  // an unknown tensor, InvalidArgument for a region outside it or a
  // wrong-size out, DataLoss if some element is held by no old rank or no
  // intact copy is left.
  Status ReadRegion(const std::string& tensor, FlatRun region,
                    MutableBytes out);
  // ReadRegion of several runs into `out`, one after another (a box's rows,
  // say), each old rank's part read once for all of them: a chunk that
  // several runs need is decoded once, not once per run. The runs must not
  // overlap. Same errors.
  Status ReadRuns(const std::string& tensor, const std::vector<FlatRun>& runs,
                  MutableBytes out);

  uint64_t version() const;

  // One line per copy dropped for a damaged chunk and the copy read
  // instead, in the order it happened.
  const std::vector<std::string>& fallbacks() const;
  std::vector<std::string> TensorNames() const;  // Sorted.

  // The tensor's dtype and global shape, or NotFound.
  Result<TensorMeta> FindTensor(const std::string& tensor) const;

  // A blob as saved: a replicated one from rank 0's store, or old rank
  // `rank`'s own one. NotFound if absent, DataLoss if damaged in every
  // copy.
  Result<std::string> ReadBlob(const std::string& name,
                               int rank = statestore::kReplicatedBlob);
  // The names of the replicated blobs (rank 0's part lists them).
  std::vector<std::string> BlobNames() const;

 private:
  struct Impl;
  explicit CheckpointReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hy::checkpoint

#endif  // HY_CHECKPOINT_CHECKPOINT_H_
