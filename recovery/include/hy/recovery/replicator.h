// Replicator: after a version commits in the ranks' own stores, copies each
// rank's part to the nodes the ring rule names (node_layout.h), over a
// reshard::Transport, so that losing a node loses no committed state.
//
// Each rank reads its committed part back from its own store (shards and
// blobs) and streams it to its holders: pieces of at most 4 MiB raw (or
// piece_bytes if smaller), each encoded with the chunk codec (the store's
// own encoding), in messages of at most message_bytes raw, one per
// all-to-all round (replica_stream.h), as many rounds as the
// longest part takes; each holder decodes each piece as it arrives and
// writes it (Store::NewPartWriter, a buffer of piece_bytes, ingested in
// encoded batches of at most piece_bytes raw) into the replica
// store of the source's node and slot in its own node directory
// (node_layout.h), under the same version, rank and commit record, and
// commits it there (synced) once the stream is complete. So neither side
// ever holds a whole part. Then the ranks exchange outcomes: the version is
// fully replicated only when every holder has committed every copy it was
// sent.
//
// Every rank calls Replicate for the same versions in the same order (from
// its checkpointing thread, on a transport of its own so that it runs beside
// training's collectives), also when its own commit failed (it then sends
// nothing and the version is reported as not replicated).
//
// Ownership: the Replicator keeps the replica stores it writes open; the
// transport is the caller's and must outlive it.
// Thread-safety: one thread at a time.
#ifndef HY_RECOVERY_REPLICATOR_H_
#define HY_RECOVERY_REPLICATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/recovery/retention.h"
#include "hy/reshard/transport.h"

namespace hy::metrics {
struct HyMetrics;
}
namespace hy::statestore {
class Store;
}

namespace hy::recovery {
namespace internal {
class PartReceiver;
}

struct ReplicatorOptions {
  std::string root;
  std::vector<int> nodes;  // Node id of each rank.
  int replicas = 1;        // Copies besides the primary.
  // Gc of a replica store after each copy keeps this many versions of the
  // copy's generation (earlier ones go by Retain).
  int keep_last = 2;
  std::string run_id;  // Recorded in the replica stores (run_identity.h).
  // For the replica stores: statestore::StoreOptions::on_damaged_chunk and
  // ::metrics (hy_damaged_chunks_total).
  std::function<void(const std::string& store, const Hash128& address,
                     const Status& why)>
      on_damaged_chunk = nullptr;
  const metrics::HyMetrics* metrics = nullptr;
  // A holder writes each copy through a buffer of this many raw bytes and
  // ingests it in encoded batches of at most this many.
  uint64_t piece_bytes = uint64_t{64} << 20;
  // A part goes in messages of at most min(message_bytes, piece_bytes) raw
  // bytes (plus one record), one per all-to-all round, so a rank holds one
  // piece (at most 4 MiB) and one message to send, and the messages it
  // receives (and the transport's copies of them). Smaller messages take
  // more rounds; 0: piece_bytes.
  uint64_t message_bytes = uint64_t{16} << 20;
};

struct ReplicateStats {
  uint64_t raw_bytes = 0;   // Of this rank's part.
  uint64_t sent_bytes = 0;  // Encoded, to all its holders.
  uint64_t received_bytes = 0;
  uint64_t rounds = 0;  // All-to-all rounds the stream took.
  double seconds = 0;
};

class Replicator {
 public:
  // REQUIRES: options.nodes.size() == transport->world_size().
  Replicator(reshard::Transport* transport, ReplicatorOptions options);
  ~Replicator();

  // Collective (see above). `own` holds this rank's part of `version`,
  // committed when own_committed. Returns OK once every copy is durable;
  // Unavailable naming the ranks whose copies are missing (their commit
  // failed, or a holder could not store them) otherwise, on every rank;
  // the transport's errors.
  Status Replicate(statestore::Store* own, uint64_t version, bool own_committed,
                   ReplicateStats* stats);

  // Applies `policy` (retention.h) to every replica store this rank holds
  // open: after a Replicate that returned OK on every rank, the versions
  // of earlier generations it supersedes go. Returns the first Gc error
  // (the others are still tried).
  Status Retain(const RetentionPolicy& policy);

 private:
  // The store holding rank `source_rank`'s copies here (its node and slot).
  Result<statestore::Store*> ReplicaStore(int source_rank);
  // Finishes (prepares) and commits one received part in its replica store.
  Status StorePart(int source_rank, internal::PartReceiver* copy);

  reshard::Transport* transport_;
  ReplicatorOptions options_;
  std::map<std::string, std::unique_ptr<statestore::Store>>
      stores_;  // By path.
};

}  // namespace hy::recovery

#endif  // HY_RECOVERY_REPLICATOR_H_
