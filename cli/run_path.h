// What hyctl says about a store path where a run root's part was given:
// import refuses a run root or one of its stores, and export and diff a
// store that holds only some ranks of a run, each naming what to do
// instead. What a path is (a run root, a store in one, a single store) is
// recovery::RunRoot's (hy/recovery/run_root.h).
//
// Thread-safety: plain functions; they look only at the path and at what
// the caller read.

#ifndef HY_CLI_RUN_PATH_H_
#define HY_CLI_RUN_PATH_H_

#include <string>

#include "hy/common/status.h"
#include "hy/statestore/manifest.h"

namespace hy::cli {

// OK when `path` may take an import (hyctl import): neither a run root nor
// a store inside one (<root>/node-<k>/<store>). Otherwise InvalidArgument
// saying why (a run's stores hold its ranks' parts, committed together;
// a version imported into one becomes the run's newest and breaks its
// resume) and what to do instead (import into a fresh store). A store that
// records a run id is refused by the caller once it is open
// (ImportIntoRunStore). Creates and opens nothing.
Status CheckImportTarget(const std::string& path);

// The InvalidArgument for an import into the store at `path`, which records
// run `run_id`.
Status ImportIntoRunStore(const std::string& path, const std::string& run_id);

// OK when `commit`, a version of the store at `path` (recording `run_id`,
// "" for none), holds every rank's part. Otherwise InvalidArgument: "P
// holds rank 0 of 2 of run ID; pass the run root R for whole tensors".
Status CheckWholeStore(const std::string& path,
                       const statestore::CommitRecord& commit,
                       const std::string& run_id);

}  // namespace hy::cli

#endif  // HY_CLI_RUN_PATH_H_
