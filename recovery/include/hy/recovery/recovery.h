// Recovery: brings a job's state back after a failure, on whatever nodes are
// left (fewer or more ranks than before), from the newest version every
// part of which survives.
//
// Every rank of the new world calls the collective methods in the same
// order, over one reshard::Transport:
//
//   Open    each rank scans the stores on its own node (rank 0 also those of
//           node directories no rank runs on: a shared store's), the ranks
//           exchange these catalogs, settle what a dead generation left
//           undecided in their own stores (commit a part whose version some
//           store committed, abort the rest), choose the newest recoverable
//           version (catalog.h) and verify the chosen copies' checksums on
//           the ranks that will serve them; a bad copy is replaced by
//           another one, or the version by an older one, and the log says
//           so.
//   Fetch   each rank names the regions of tensors it needs (its shards
//           under the new layout); the rank serving each old part reads the
//           overlaps from its local copy, and sends them to the ranks that
//           need them in one all-to-all: local reads first, the transport
//           only for what another node holds.
//
// A part is served by the rank on the node that holds the copy chosen for
// it (its primary if that node lives, else a replica), or by rank 0 for a
// copy in a directory no rank runs on.
//
// Errors: a collective that fails returns the transport's error on every
// rank that sees it; an error on one rank (a read that fails) is reported on
// every rank, after the exchange, so no rank waits forever.
//
// Thread-safety: one thread per Recovery.
#ifndef HY_RECOVERY_RECOVERY_H_
#define HY_RECOVERY_RECOVERY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/result.h"
#include "hy/common/shard.h"
#include "hy/recovery/catalog.h"
#include "hy/reshard/transport.h"

namespace hy::statestore {
class Store;
}

namespace hy::metrics {
struct HyMetrics;
}  // namespace hy::metrics

namespace hy::recovery {

struct RecoveryOptions {
  std::string root;
  std::vector<int> nodes;  // Node id of each rank of the new world.
  int64_t step = -1;       // Recover this step; -1: the newest.
  // Fetch sends other ranks their shards in rounds: a rank reads and sends
  // at most this many bytes of tensor data per round (one element at
  // least), so it holds that much to send and what the others send it in
  // one round, never a whole part. Its own needs are read in place.
  uint64_t fetch_bytes = uint64_t{64} << 20;
  // Lines saying what was lost, used and from where (damaged chunks met
  // among them). May be null.
  std::function<void(const std::string&)> log;
  // Counts the damaged chunks met (hy_damaged_chunks_total). May be null.
  const metrics::HyMetrics* metrics = nullptr;
};

// A region of a tensor a rank needs, and where to put it
// (region.length elements of the tensor's dtype).
struct TensorNeed {
  std::string name;
  FlatRun region;
  MutableBytes out;
};

struct RecoveryStats {
  double scan_seconds = 0;    // Scan, exchange of catalogs, settling.
  double verify_seconds = 0;  // Choice and checksum verification.
  double read_seconds = 0;    // Reading local copies (all Fetch calls).
  double exchange_seconds = 0;
  uint64_t local_bytes = 0;          // Read from this node for this rank.
  uint64_t sent_bytes = 0;           // Read here for other ranks.
  uint64_t received_bytes = 0;       // From other ranks' nodes.
  int fetch_rounds = 0;              // Exchange rounds of all Fetch calls.
  uint64_t largest_round_bytes = 0;  // Most sent by this rank in one round.
  int settled_commits = 0;           // Leftover parts committed / aborted.
  int settled_aborts = 0;
};

class Recovery {
 public:
  // Collective. Returns OK with has_state() false when no store committed
  // anything (a fresh start). Returns DataLoss when versions were committed
  // but every one lacks a part with a good copy (naming the ranks), the
  // transport's errors, IOError from listing directories.
  // REQUIRES: options.nodes.size() == transport->world_size().
  static Result<std::unique_ptr<Recovery>> Open(reshard::Transport* transport,
                                                const RecoveryOptions& options);
  ~Recovery();

  bool has_state() const;
  // The generation the new start writes its versions with.
  uint32_t next_generation() const;
  // REQUIRES: has_state().
  const Choice& choice() const;
  const RecoveryStats& stats() const;

  // Collective: a replicated blob of the chosen version, as saved. Returns
  // NotFound if the version has no such blob, DataLoss if it is damaged.
  Result<std::string> FetchBlob(const std::string& name);

  // Collective: fills every need of this rank. Returns DataLoss naming the
  // tensor if part of a need is held by no old rank or a chunk read fails,
  // InvalidArgument for a malformed need, and any rank's error on all.
  Status Fetch(const std::vector<TensorNeed>& needs);

 private:
  struct Impl;
  explicit Recovery(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hy::recovery

#endif  // HY_RECOVERY_RECOVERY_H_
