// What a path handed to hyctl names, for the commands that need one kind:
// a run root (the node-<k>/ directories hyctl train writes: train
// --resume, restore, export-hf) or a store that holds whole tensors
// (export, diff). A path of another kind, a single store or the store of
// one rank of a run, is named as such (InvalidArgument: a usage error)
// before anything is read from it or created in it, instead of failing
// later as if data were missing or damaged.
//
// A run root whose stores belong to two runs (another job's node
// directory copied in) is refused by every command that reads it
// (CheckOneRun here, checkpoint::CheckpointReader::Open for the readers of a
// step), naming both run ids.
//
// Thread-safety: plain functions; CheckRunRoot only looks at the file
// system.

#ifndef HY_CLI_RUN_PATH_H_
#define HY_CLI_RUN_PATH_H_

#include <memory>
#include <string>

#include "hy/common/result.h"
#include "hy/common/status.h"
#include "hy/statestore/manifest.h"
#include "hy/statestore/store.h"

namespace hy::cli {

// OK when `path` is a run root. Otherwise NotFound when it does not exist
// or holds no node-<k> directory, InvalidArgument when it is a single
// store ("P is a single store, not a run root; pass the run root R that
// holds it" when it lies in one). Creates and opens nothing.
Status CheckRunRoot(const std::string& path);

// OK when the stores under run root `root` belong to one run (or record
// none): recovery::RecordedRunId, passing over stores that cannot be opened
// (the commands report those themselves). Otherwise FailedPrecondition
// naming two stores and both run ids, for the commands that act on every
// store of a root (inspect, verify, gc, repair); the readers of a step get
// the same check from checkpoint::CheckpointReader::Open.
Status CheckOneRun(const std::string& root);

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

// `s` (from opening or using the store at `path`), or FailedPrecondition
// "PATH is open in another process (a running job?): stop it first" when
// it is RocksDB's refusal of a store another process holds for writing.
Status ExplainLocked(const Status& s, const std::string& path);

// Opens the existing store at `path` (never creates one), as
// Store::Open, with a locked store explained (ExplainLocked).
Result<std::unique_ptr<statestore::Store>> OpenExistingStore(
    const std::string& path, bool read_only);

}  // namespace hy::cli

#endif  // HY_CLI_RUN_PATH_H_
