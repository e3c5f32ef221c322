// Checkpointer: the trainer's way into hy::statestore. Each rank owns one
// store, <root>/rank-NNNNN (RocksDB allows one writer per store), and a
// version is committed across the ranks' stores with group_commit's
// two-phase protocol: rank 0 is the coordinator, its store decides.
//
// Saving: Save() copies the rank's shards (Store::SaveAsync), so the caller
// may update its tensors as soon as it returns, and a background thread
// then waits for the save, and runs the commit (CommitAcrossStores on rank
// 0, FollowCommit on the others). Training goes on meanwhile; at most one
// checkpoint is in flight per rank (Save waits for the previous one).
// The version number is the step.
//
// Loading (resume, any world size): OpenForResume reads the newest version
// committed in the coordinator's store, its world size W from the commit
// record, and opens the W old rank stores read-only; ReadRegion then reads
// any region of any tensor from whichever old stores hold it, so a rank of
// the new world assembles its new shard whatever the old layout was.
//
// Thread-safety: one thread uses a Checkpointer; its background thread is
// internal.

#ifndef HY_TRAINER_CHECKPOINT_H_
#define HY_TRAINER_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/result.h"
#include "hy/common/shard.h"
#include "hy/statestore/store.h"

namespace hy::trainer {

struct CheckpointOptions {
  std::string root;  // Holds rank-NNNNN/ per rank.
  int rank = 0;
  int world_size = 1;
  int keep_last = 2;  // Gc after each commit keeps this many versions.
  int64_t commit_timeout_ms = 60000;
  const metrics::HyMetrics* metrics = nullptr;  // Not owned; may be null.
};

// The state of the newest checkpoint as the training loop reports it.
struct CheckpointStatus {
  int64_t committed_step = -1;  // Newest committed by this rank; -1 none.
  int64_t in_flight_step = -1;  // Saving or committing; -1 none.
  Status last_error;            // Of the newest finished checkpoint.
};

class Checkpointer {
 public:
  // Opens (creating) this rank's store. Gives up versions a dead run left
  // prepared but uncommitted above the newest committed one (rank 0 aborts
  // them; the others follow the coordinator's decision). Returns the
  // store's errors.
  static Result<std::unique_ptr<Checkpointer>> Open(
      const CheckpointOptions& options);
  ~Checkpointer();  // Waits for the checkpoint in flight.

  // Starts checkpoint `step`: copies the data of `shards` and `blobs`
  // before returning; the commit record carries `layout` and `rules`.
  // Waits first for the previous checkpoint. Returns InvalidArgument for
  // malformed shards, the previous checkpoint's error is reported in
  // status(), not here.
  Status Save(uint64_t step, std::vector<statestore::ShardData> shards,
              std::vector<statestore::BlobData> blobs,
              const std::string& layout, const std::string& rules);

  // Non-blocking.
  CheckpointStatus status() const;

  // Blocks until the checkpoint in flight (if any) is committed or failed;
  // returns its status.
  Status Wait();

  // The newest committed step under options.root as rank 0's store says,
  // or NotFound if none (or no store there yet).
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
  // Opens the newest committed version under `root` (or `step` if >= 0):
  // rank 0's store decides what is committed; every old rank store is
  // opened read-only. Returns NotFound if nothing is committed,
  // DataLoss if an old rank's store is missing or lacks the version.
  static Result<std::unique_ptr<CheckpointReader>> Open(
      const std::string& root, int64_t step = -1);
  ~CheckpointReader();

  uint64_t step() const;
  const statestore::CommitRecord& commit() const;  // Rank 0's record.

  // Reads elements [region.offset, region.end()) of the flattened tensor,
  // assembling them from the old ranks' shards. Returns NotFound for an
  // unknown tensor, InvalidArgument for a region outside it or a wrong-size
  // out, DataLoss if some element is held by no old rank or a chunk is bad.
  Status ReadRegion(const std::string& tensor, FlatRun region,
                    MutableBytes out);

  // A replicated blob (as rank 0 saved it). NotFound if absent.
  Result<std::string> ReadBlob(const std::string& name);

 private:
  struct Impl;
  explicit CheckpointReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_CHECKPOINT_H_
