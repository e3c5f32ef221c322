// Offline reshard of a trainer run (hyctl reshard RUN_ROOT --to LAYOUT):
// one committed step of the run, read through checkpoint::CheckpointReader
// from whichever copies survive, written as a new run root that a trainer
// of the new world size resumes (hyctl train --resume OUT). Every model's
// parameters and Adam moments (run_models.h) are cut for the new layout,
// each new rank's part into its own store, <out>/node-<r>/store (rank r on
// node r, no replicas), committed together with the trainer's two-phase
// protocol (statestore/group_commit.h) under the step's version id and run
// id. The replicated blobs come along; trainer.state and trainer.config
// are rewritten for the new world (its world size, trainer.nproc, a
// rollout tensor-parallel size that divides it), recovery.placement for
// the new placement.
//
// Memory: one new rank's part at a time. Nothing is left behind on
// failure: the new root is built under a temporary name beside `out` and
// renamed into place once every store has committed.
//
// Thread-safety: one thread.

#ifndef HY_CLI_LAYOUT_RESHARD_RUN_H_
#define HY_CLI_LAYOUT_RESHARD_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/reshard/layout.h"

namespace hy::cli {

struct RunReshardOptions {
  std::string root;   // The run root to read.
  int64_t step = -1;  // -1: the newest step every old rank's part survives.
  reshard::Layout to;
  std::string out;    // Must not exist; its parent must.
  std::string rules;  // A rules file; empty: the step's recorded rules.
  bool allow_other_run = false;
};

struct RunReshardResult {
  uint64_t step = 0;
  std::string from;  // The step's recorded layout.
  int from_world = 0;
  size_t tensors = 0;
  uint64_t bytes = 0;      // Logical bytes written over every new rank.
  uint64_t new_bytes = 0;  // Encoded bytes written.
  // What the user should know: a rollout tp changed to fit, copies that
  // were read instead of damaged ones.
  std::vector<std::string> notes;
};

// Returns InvalidArgument for an `out` that exists or whose parent does not,
// NotFound / DataLoss / FailedPrecondition as CheckpointReader::Open and
// RunModelsOf, InvalidArgument for a layout that does not fit a tensor
// (ShardMap::Build, naming it), or the stores' errors.
Result<RunReshardResult> ReshardRunRoot(const RunReshardOptions& options);

}  // namespace hy::cli

#endif  // HY_CLI_LAYOUT_RESHARD_RUN_H_
