// Committing a version whose ranks each own a store on their own host,
// decided over a reshard::Transport.
//
// statestore/group_commit.h decides by reading the peers' stores through
// the filesystem, which needs one shared filesystem. Ranks on different
// hosts share none, so here the two phases go over the network:
//   1. every rank reports its prepare outcome (its Save's status and sizes)
//      in one all-gather;
//   2. rank 0, the coordinator, commits the version in its own store when
//      every rank prepared (that synced write is the decision) and aborts it
//      there otherwise;
//   3. a second all-gather carries the decision; every other rank writes
//      the same record (ranks = {its rank}) into its own store, or aborts.
// A version is committed if and only if rank 0's store holds its commit
// record, as in group_commit.h. A rank that dies after step 2 leaves a
// prepared part behind; a coordinator that dies before step 3 leaves every
// follower with one (the all-gather fails). Recovery settles both from the
// catalog of every surviving store (recovery.h): committed where a commit
// record survives, aborted otherwise.
//
// Every rank calls CommitOverTransport for the same versions in the same
// order. Thread-safety: one call at a time per transport.
#ifndef HY_RECOVERY_TRANSPORT_COMMIT_H_
#define HY_RECOVERY_TRANSPORT_COMMIT_H_

#include "hy/common/result.h"
#include "hy/reshard/transport.h"
#include "hy/statestore/manifest.h"
#include "hy/statestore/store.h"

namespace hy::recovery {

// Collective. `own` holds this rank's part of commit.version, prepared if
// `prepared` is OK (with `stats` from its Save). `commit` is the record to
// write (rank 0's is the one every rank writes; the byte counts become the
// sums over all ranks). Returns OK once this rank's store has committed;
// Aborted naming the ranks that did not prepare (the version is aborted in
// every store that heard the decision); the transport's errors (the part
// stays prepared, see above); the store's errors.
Status CommitOverTransport(reshard::Transport* transport,
                           statestore::Store* own,
                           statestore::CommitRecord commit,
                           const Status& prepared,
                           const statestore::SaveStats& stats);

}  // namespace hy::recovery

#endif  // HY_RECOVERY_TRANSPORT_COMMIT_H_
