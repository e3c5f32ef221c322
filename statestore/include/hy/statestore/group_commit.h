// Committing a version whose ranks each own a store: one process per node,
// each writing its own RocksDB (RocksDB allows one writer per store).
//
// The protocol is two-phase commit with presumed abort:
//   1. every rank Save()s its part into its own store: chunks, manifest and
//      prepared record, synced;
//   2. the coordinator waits until it sees every rank's prepared record in
//      that rank's store (read through a RocksDB secondary instance), then
//      commits in its own store. That synced write is the decision;
//   3. every other rank waits until it sees the coordinator's commit record
//      and writes the same record into its own store.
// A version is committed if and only if the coordinator's store holds its
// commit record. If some rank never prepares, the coordinator gives up at
// its deadline and writes an abort record instead; followers copy it, and
// only then do their Gc drop the prepared parts (a follower never aborts on
// its own: the coordinator may have committed). A rank that died between
// steps 2 and 3 finishes step 3 on restart by calling FollowCommit again.
//
// In each store the commit record lists the ranks it holds (CommitRecord::
// ranks = {rank}), so a node's store describes exactly its own shards.
//
// Thread-safety: the functions may run concurrently on different stores.

#ifndef HY_STATESTORE_GROUP_COMMIT_H_
#define HY_STATESTORE_GROUP_COMMIT_H_

#include <chrono>
#include <string>
#include <vector>

#include "hy/statestore/store.h"

namespace hy::statestore {

struct PeerStore {
  int rank = 0;
  std::string path;  // The store that rank writes.
};

// Coordinator side. `own` is the coordinator's store, holding the parts of
// commit.ranks (normally just its own rank); `peers` are the other ranks'
// stores. Returns Unavailable naming the ranks that had not prepared when
// `timeout` ran out: the version is then aborted in `own` (Store::Abort),
// which tells the followers. Otherwise returns the error of the final
// Commit (e.g. AlreadyExists).
Status CommitAcrossStores(Store* own, const CommitRecord& commit,
                          const std::vector<PeerStore>& peers,
                          std::chrono::milliseconds timeout);

// Follower side: waits until the store at `coordinator_path` has decided
// `version`. On commit, commits the same record, for `own_rank`, in `own`
// and returns OK (also when `own` had committed it already). On abort,
// aborts it in `own` and returns Aborted. Returns Unavailable if there is no
// decision by `timeout`: `own` keeps its prepared part, and its Gc keeps it
// too, since the outcome is unknown; call again later.
Status FollowCommit(Store* own, int own_rank,
                    const std::string& coordinator_path, uint64_t version,
                    std::chrono::milliseconds timeout);

}  // namespace hy::statestore

#endif  // HY_STATESTORE_GROUP_COMMIT_H_
