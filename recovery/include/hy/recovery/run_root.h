// RunRoot: a path opened as the root of a training run, the directory of
// node-<k>/ directories a run writes (node_layout.h), and everything the
// commands and readers of a run ask of it: its nodes and stores, the run
// they belong to, what each store holds (the catalog: every committed step
// and its copies), and dropping steps from every copy.
//
// A path of another kind (a single store, the store of one rank of a run,
// nothing at all) is named as such before anything is read or created
// (Classify, Open), instead of failing later as if data were missing.
//
// A root whose stores belong to two runs (another job's node directory
// copied in) is refused by RunId and Scan, naming both run ids, unless the
// caller allows it.
//
// Ownership and thread-safety: a RunRoot holds only its path. Every call
// looks at the file system afresh (a run may be writing the root), opening
// the stores it needs and closing them before it returns; concurrent calls
// are as safe as the stores' own concurrent opening (a store a running job
// holds for writing refuses DropSteps: ExplainLockedStore).

#ifndef HY_RECOVERY_RUN_ROOT_H_
#define HY_RECOVERY_RUN_ROOT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"
#include "hy/recovery/catalog.h"
#include "hy/recovery/node_layout.h"
#include "hy/statestore/store.h"

namespace hy::recovery {

// What a path names, as far as the file system says without opening
// anything.
enum class PathKind {
  kMissing,   // Nothing at the path.
  kRunRoot,   // A directory holding at least one node-<k> directory.
  kRunStore,  // A store inside a run root: <root>/node-<k>/<store>.
  kStore,     // A store (a RocksDB directory) outside any run root.
  kOther,     // Something else: an empty or unrelated directory, a file.
};

// Every store of a run root and what it holds.
struct RunRootScan {
  std::vector<int> nodes;  // Node ids with a directory, ascending.
  Catalog catalog;         // Every store's versions (unreadable ones named).
  // The steps some store holds (any state) / committed, ascending.
  std::set<uint64_t> Steps() const;
  std::set<uint64_t> CommittedSteps() const;
};

// A store that lost versions to DropSteps, and what it lost.
struct DroppedStore {
  StoreLocation where;
  statestore::GcReport report;
};

// What RunRoot::DropSteps reported, summed over its stores: the versions
// removed (committed and uncommitted) and the steps they held.
struct DropTotals {
  size_t versions = 0;
  std::set<uint64_t> steps;
};
DropTotals SumDropped(const std::vector<DroppedStore>& dropped);

// Steps as hyctl lists them: "3,5,9" ("" for none).
std::string JoinSteps(const std::set<uint64_t>& steps);

class RunRoot {
 public:
  static PathKind Classify(const std::string& path);
  static bool Is(const std::string& path) {
    return Classify(path) == PathKind::kRunRoot;
  }
  // The run root that the store at `path` (<root>/node-<k>/<store>) lies
  // in, or "" when its directory is not a node's. Looks at the path only.
  static std::string Enclosing(const std::string& path);

  // Opens `path` as a run root. Returns NotFound when it does not exist or
  // holds no node-<k> directory, InvalidArgument when it is a single store
  // ("P is a single store, not a run root; pass the run root R that holds
  // it" when it lies in one). Opens no store.
  static Result<RunRoot> Open(const std::string& path);

  const std::string& path() const { return path_; }

  // The node ids with a directory, ascending. IOError if it cannot be
  // listed.
  Result<std::vector<int>> Nodes() const;
  // Every store (primaries and replicas of every node, ListRootStores
  // order).
  Result<std::vector<StoreLocation>> Stores() const;

  // The run id the stores record ("" when none does), passing over stores
  // that cannot be opened (Scan names those). Returns FailedPrecondition
  // naming two stores and both run ids when the root mixes two runs.
  Result<std::string> RunId() const;

  // Opens every store read-only (once) and records what it holds. Checks
  // that the stores belong to one run (as RunId), unless allow_other_run.
  // Returns IOError if a directory cannot be listed; a store that cannot be
  // opened is named in catalog.unreadable() instead.
  Result<RunRootScan> Scan(bool allow_other_run = false) const;

  // Removes every version (any generation, committed or not) of each step
  // `which` accepts from every store, primaries and replicas. Checks
  // nothing about the steps: callers refuse what must not go. Each store
  // that lost something is appended to `*dropped` (also when a later store
  // fails). Returns the first store's error, naming the store (one a
  // running job holds: ExplainLockedStore).
  // REQUIRES: dropped != nullptr.
  Status DropSteps(const std::function<bool(uint64_t step)>& which,
                   std::vector<DroppedStore>* dropped) const;

 private:
  explicit RunRoot(std::string path) : path_(std::move(path)) {}
  // `run`, its FailedPrecondition (two runs) told to move one run out.
  Result<std::string> RefuseMixed(Result<std::string> run) const;

  std::string path_;
};

// `s` (from opening or using the store at `path`), or FailedPrecondition
// "PATH is open in another process (a running job?): stop it first" when
// it is RocksDB's refusal of a store another process holds for writing.
Status ExplainLockedStore(const Status& s, const std::string& path);

// Opens the existing store at `path` (never creates one), as
// statestore::Store::Open, with a locked store explained
// (ExplainLockedStore).
Result<std::unique_ptr<statestore::Store>> OpenExistingStore(
    const std::string& path, bool read_only);

}  // namespace hy::recovery

#endif  // HY_RECOVERY_RUN_ROOT_H_
