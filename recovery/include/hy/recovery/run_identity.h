// Run identity: which training run the stores under a run root belong to.
//
// A run id names one training job across all its restarts: torchrun's
// TORCHELASTIC_RUN_ID (its --rdzv-id; --standalone makes one up), or the
// id `hyctl train` generates and hands its workers as HY_RUN_ID. Every
// store a run writes records its id (statestore::StoreOptions::run_id), so
// a second job pointed at the same root (two torchrun jobs on the default
// port, a copy-pasted --store) is refused before it resumes or
// garbage-collects anything of the first, unless its user explicitly
// allows taking the stores over.
//
// Thread-safety: plain functions.

#ifndef HY_RECOVERY_RUN_IDENTITY_H_
#define HY_RECOVERY_RUN_IDENTITY_H_

#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"

namespace hy::recovery {

// HY_RUN_ID if set, else TORCHELASTIC_RUN_ID unless it is empty or "none"
// (torchrun's default without --rdzv-id); "" when neither names a run.
std::string RunIdFromEnv();

// A new run id: "hy-YYYYmmdd-HHMMSS-" and 8 random hex digits.
std::string NewRunId();

// Returns InvalidArgument unless `id` is 1-128 characters of [A-Za-z0-9._-]
// (it becomes part of directory names).
Status ValidateRunId(const std::string& id);

// Opens every store in node `node`'s directory under `root` (primary and
// replicas) for writing with `run_id`: stores that record no run adopt it;
// with allow_other_run, stores of another run are taken over. Returns
// FailedPrecondition naming the store and both runs for a store of another
// run (without allow_other_run), IOError when the directory cannot be
// listed, or the store's error. An empty run_id claims nothing.
Status ClaimNodeStores(const std::string& root, int node,
                       const std::string& run_id, bool allow_other_run);

// The run id recorded by the stores under `root` (every node directory),
// "" when none records one (or there are no stores). Returns
// FailedPrecondition naming two stores and their runs when stores of
// different runs are mixed under it, or a store's error; with
// skip_unreadable, a store that cannot be opened is passed over instead (for
// readers that report such stores themselves).
Result<std::string> RecordedRunId(const std::string& root,
                                  bool skip_unreadable = false);

// The run id one store records ("" for none), as a scan finds it.
struct StoreRunId {
  std::string path;
  std::string run_id;
};

// RecordedRunId over run ids already read (Catalog::Scan collects them as
// it opens each store): the one run they record, "" when none records one.
// Returns FailedPrecondition naming two stores and their runs when they
// differ.
Result<std::string> OneRunId(const std::string& root,
                             const std::vector<StoreRunId>& ids);

}  // namespace hy::recovery

#endif  // HY_RECOVERY_RUN_IDENTITY_H_
