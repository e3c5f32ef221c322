// Catalog: what every store of a run holds, version by version and copy by
// copy, and the choice of the version to recover.
//
// Each rank scans the stores on its own node (Scan), the ranks exchange
// their catalogs (Encode / Decode / Merge), and every rank then holds the
// same global view and makes the same choice (ChooseVersion): the newest
// version that some store committed and whose every old rank's part still
// has a usable copy (a primary or a replica), skipping copies found bad.
//
// A part prepared but never committed in its own store counts as usable when
// another store holds the version's commit record: the coordinator decided
// commit (group_commit.h), and the rank died before copying the decision;
// recovery commits it there before reading (SettleLeftovers in recovery.h).
//
// Thread-safety: a Catalog is a plain value.
#ifndef HY_RECOVERY_CATALOG_H_
#define HY_RECOVERY_CATALOG_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"
#include "hy/recovery/node_layout.h"
#include "hy/recovery/run_identity.h"
#include "hy/statestore/manifest.h"

namespace hy::recovery {

enum class CopyState { kCommitted, kPrepared, kAborted };

// "committed", "prepared", "aborted".
const char* CopyStateName(CopyState state);

// One store's record of one version.
struct CopyEntry {
  StoreLocation where;
  uint64_t version = 0;
  CopyState state = CopyState::kPrepared;
  std::vector<int> ranks;           // The old ranks whose parts it holds.
  statestore::CommitRecord commit;  // When committed.
};

class Catalog {
 public:
  // Opens each store read-only and records its versions. A store that
  // cannot be opened (damaged, not a store) is left out and named in
  // unreadable(). With `run_ids`, each opened store's recorded run id is
  // appended to it too (for OneRunId, without opening the stores again).
  // Returns IOError only for a failure to list.
  static Result<Catalog> Scan(const std::vector<StoreLocation>& stores,
                              std::vector<StoreRunId>* run_ids = nullptr);
  // Scan of every store of every node under `root` (primaries and
  // replicas); *nodes gets the node ids, ascending. Returns IOError if a
  // directory cannot be listed.
  static Result<Catalog> ScanRoot(const std::string& root,
                                  std::vector<int>* nodes,
                                  std::vector<StoreRunId>* run_ids = nullptr);

  // JSON, for the exchange between ranks. Decode returns DataLoss for text
  // that Encode did not write.
  std::string Encode() const;
  static Result<Catalog> Decode(std::string_view text);
  void Merge(const Catalog& other);

  const std::vector<CopyEntry>& entries() const { return entries_; }
  const std::vector<std::string>& unreadable() const { return unreadable_; }

  // The commit record of `version` from any store that committed it, or
  // nullptr.
  const statestore::CommitRecord* FindCommit(uint64_t version) const;
  // One above the highest generation of any version seen (committed,
  // prepared or aborted): the generation of the next start.
  uint32_t NextGeneration() const;

 private:
  std::vector<CopyEntry> entries_;
  std::vector<std::string> unreadable_;
};

// "primary on node 0", "replica of node 1 (slot 1) on node 2".
std::string DescribeCopy(const CopyEntry& copy);

// A key naming one old rank's part in one store: "path#version#rank".
std::string CopyKey(const CopyEntry& copy, int rank);

// The version to recover and the copy to read each old rank's part from.
struct Choice {
  uint64_t version = 0;
  statestore::CommitRecord commit;
  std::vector<CopyEntry> source;   // Index: old rank.
  std::vector<std::string> notes;  // Newer versions passed over, and why.
};

// Chooses the newest version committed somewhere (commit.step == step when
// step >= 0, written by `generation` when generation >= 0) whose every old rank
// has a copy not in `bad`; copies on `live_nodes` come first (primary before
// replica), then the others (a shared store's directories of nodes no rank runs
// on). Returns NotFound if no store committed any version (or `step`); DataLoss
// naming, for the newest version, the ranks whose every copy is lost or bad
// when no committed version is complete.
Result<Choice> ChooseVersion(const Catalog& catalog,
                             const std::vector<int>& live_nodes,
                             const std::set<std::string>& bad,
                             int64_t step = -1, int64_t generation = -1);

}  // namespace hy::recovery

#endif  // HY_RECOVERY_CATALOG_H_
