// Retention: which versions a run's stores keep once the run has moved on,
// and which stores it no longer needs at all.
//
// A run's stores hold versions of several generations (one per start of the
// job, node_layout.h). The live generation is the one running now (offline:
// the newest generation that committed a version). A version of another
// generation is superseded once the live generation has a safe version at
// the same or a later step: committed, with every old rank's part held by a
// primary and `replicas` copies (fewer only in a world too small to hold
// them). Superseded versions go from every store, whatever keep_last says;
// within the live generation each store keeps its newest keep_last
// versions. A store left holding no version (a departed node's, a replica
// of a source that moved elsewhere) goes as a whole, and so does a node
// directory left without stores that no rank of the run uses. Until a safe
// version exists nothing of another generation goes: it may hold the last
// usable copy of the newest recoverable state. Pinned versions (and, for a
// run root, the newest recoverable one) are never dropped.
//
// Thread-safety: plain functions and values.
#ifndef HY_RECOVERY_RETENTION_H_
#define HY_RECOVERY_RETENTION_H_

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/recovery/catalog.h"
#include "hy/recovery/node_layout.h"
#include "hy/statestore/store.h"

namespace hy::recovery {

struct RetentionPolicy {
  uint32_t live_generation = 0;
  uint64_t safe_version = 0;  // 0: the live generation has none yet.
  size_t keep_last = 1;       // Of the live generation, per store.
  std::set<uint64_t> pinned;  // Kept whatever else says.

  // Of another generation, at or below safe_version's step (never a pinned
  // one).
  bool Superseded(uint64_t version) const;
};

// The store-level Gc options that apply `policy` to one store.
statestore::GcOptions GcOptionsFor(const RetentionPolicy& policy);

// Offline retention for a run root (hyctl gc).
struct RootRetention {
  RetentionPolicy policy;
  int replicas = 0;          // The copies beyond the primary asked for.
  uint64_t newest_live = 0;  // The live generation's newest committed version.
  std::string why_unsafe;    // When policy.safe_version is 0.
};

// Plans retention from the catalog of every store of a run root: the live
// generation, its newest safe version (`replicas` copies beyond the
// primary; < 0: as many as the best-copied part of any version has, or as
// many replica stores as any source node has, whichever is more), and
// as pinned the newest recoverable version and every version of
// `pinned_steps`. REQUIRES: keep_last >= 1.
// Returns NotFound if no store committed anything, or naming a pinned step
// no store holds.
Result<RootRetention> PlanRootRetention(const Catalog& catalog,
                                        const std::vector<int>& nodes,
                                        size_t keep_last, int replicas,
                                        const std::set<uint64_t>& pinned_steps);

// What ApplyRetention did to one store.
struct StoreRetention {
  StoreLocation where;
  statestore::GcReport report;
  bool removed = false;  // Nothing was left: the store's directory went.
};

// Applies `policy` to each store (opened for writing with `run_id`, "" for
// none): Gc, then removal of a store left holding no version. Stops at the
// first store that cannot be opened or collected and returns its error
// naming the store; `done` (may be null) gets what was done until then.
Status ApplyRetention(const std::vector<StoreLocation>& stores,
                      const RetentionPolicy& policy, const std::string& run_id,
                      std::vector<StoreRetention>* done);

// Removes the directories of nodes under `root` that hold no store any more
// and are not in `live_nodes`. Returns the removed node ids, or IOError.
Result<std::vector<int>> RemoveEmptyNodes(const std::string& root,
                                          const std::vector<int>& live_nodes);

// The stores in node `node`'s directory that no rank of a world on `nodes`
// with `replicas` writes (primaries of its ranks, replicas they hold): left
// over from earlier generations. Returns IOError if it cannot be listed.
Result<std::vector<StoreLocation>> StaleNodeStores(
    const std::string& root, int node, const std::vector<int>& nodes,
    int replicas);

}  // namespace hy::recovery

#endif  // HY_RECOVERY_RETENTION_H_
