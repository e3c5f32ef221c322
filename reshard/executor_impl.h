// Internal to the executor: Executor::Impl, what one run's steps do with
// buckets (executor_steps.cc: pack a rank's buckets for its peers, unpack
// what they sent, agree on the outcome), beside the run's orchestration and
// setup in executor.cc.
//
// Thread-safety: as Executor; Pack runs per-peer packing on `pool`.

#ifndef HY_RESHARD_EXECUTOR_IMPL_H_
#define HY_RESHARD_EXECUTOR_IMPL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "executor_internal.h"
#include "hy/common/thread_pool.h"
#include "hy/reshard/executor.h"
#include "sparse_delta.h"
#include "spill_file.h"
#include "wire.h"

namespace hy::reshard {
namespace internal {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A one-byte bucket from a rank that has failed this run.
inline constexpr uint8_t kPeerFailed = 0xFF;

// What Pack did; the buckets themselves are Impl::buckets[step].
struct Packed {
  double seconds = 0;
  int64_t changed = 0;
  int64_t unchanged_buckets = 0;
  int64_t full_by_cost = 0;
  int64_t scan_bytes = 0;     // Sparse scans: wire bytes looked at, and the
  double scan_seconds = 0;    // time they took.
  int64_t gather_bytes = 0;   // Full forms packed without a delta, and the
  double gather_seconds = 0;  // time that took.
  Status status;
};

// What one Run learns beyond its ReshardStats: the largest message from
// each peer, the fastest exchange of at least 1 MiB (learn_link_speed),
// and the sparse scans' and gathers' bytes and time.
struct RunTally {
  std::vector<size_t> most_received;  // [peer]
  double fastest_exchange = 0;
  int64_t scan_bytes = 0, gather_bytes = 0;
  double scan_seconds = 0, gather_seconds = 0;

  // Adds a step's pack to the tally and to `st`.
  void AddPacked(const Packed& packed, ReshardStats* st);
};

}  // namespace internal

struct Executor::Impl {
  using PeerList = internal::PeerList;
  using Packed = internal::Packed;

  const TransferPlan* plan = nullptr;
  Transport* transport = nullptr;
  ExecutorOptions options;
  int rank = 0;
  int world = 0;
  // [step][peer]: what this rank sends to / receives from peer.
  std::vector<std::vector<PeerList>> send, recv;
  std::vector<Transfer> local;  // plan.local with dst_rank == rank.
  int64_t local_bytes = 0, same_node_bytes = 0, cross_node_bytes = 0;
  int64_t logical_bytes_sent = 0;
  // Sparse delta: whether buckets[][] hold what was last sent (the full
  // form of every bucket), the previous copy each delta is taken against.
  bool delta_ready = false;
  // The link speed the delta choices use (options', then learned with
  // learn_link_speed) and the sparse scan's measured speed (0: not yet).
  double link_bytes_per_second = 0;
  double scan_bytes_per_second = 0;
  double gather_bytes_per_second = 0;  // Packing a full form (0: not yet).

  // Per [step][peer]: whether the list can go the sparse way (one wire
  // dtype, and a link fast enough that the codec's XOR form never pays).
  std::vector<std::vector<uint8_t>> send_sparse, recv_sparse;
  // Per [step][peer]: the first peer whose list takes the same source
  // elements in the same order (the planner cuts such twins, e.g. the dp
  // replicas of one tp shard, in lockstep), whose bucket goes to this peer
  // too; the peer itself if none. Only such first peers are packed.
  std::vector<std::vector<int>> packed_as;

  // Buffers kept across runs (allocating and faulting in fresh pages for
  // every bucket cost more than the copies themselves): each step's full
  // bucket to each peer (under sparse delta, also the copy last sent),
  // the delta form when one goes instead, scratch space for Pack per peer
  // (peers are packed in parallel) and for Unpack (the calling thread's).
  std::vector<std::vector<internal::WireBuffer>> buckets;  // [step][peer]
  std::vector<std::vector<internal::WireBuffer>> deltas;   // [step][peer]
  std::vector<std::vector<uint8_t>> sends_delta;           // [step][peer]
  std::vector<internal::WireBuffer> pack_fresh;            // [peer]
  std::vector<internal::SparseScratch> sparse_scratch;     // [peer]
  internal::WireBuffer unpack_before, unpack_now;
  // What each step receives, kept across steps and runs: transports
  // resize it in place, so its pages stay faulted in (a buffer much larger
  // than anything a run received is freed after it: sparse deltas after
  // a full first run would otherwise keep the full size for good).
  std::vector<std::vector<uint8_t>> got;
  std::unique_ptr<ThreadPool> pool;  // Packs peers in parallel; may be null.
  // While parked: the buckets that were previous copies; null otherwise.
  std::unique_ptr<internal::ParkedBuckets> parked;

  // Reads the parked buckets back; the delta state is forgotten if that
  // fails.
  void Unpark();

  // The full form of `list` from `src` into *b.
  void GatherFull(const PeerList& list, const std::vector<ConstBytes>& src,
                  internal::WireBuffer* b);

  // Packs this rank's bucket for `peer` in `step`: the full form into
  // buckets[step][peer], and under `delta` a cheaper form against the
  // previous full form into deltas[step][peer] when there is one
  // (sends_delta says which goes).
  Packed PackPeer(size_t step, int peer, const std::vector<ConstBytes>& src,
                  bool delta);

  // Packs this rank's buckets of `step` for every peer (in parallel on
  // `pool` when more than one is packed). The result sums what each did and
  // carries the first error.
  Packed Pack(size_t step, const std::vector<ConstBytes>& src, bool delta);

  // Every rank learns whether all succeeded. Returns OK if all did, else
  // the first failing rank's error (by rank order), named.
  Status Agree(const Status& mine);

  // Writes what each peer sent in `step` (got[peer]: a full, delta or
  // failed-rank bucket) into `dst`. Returns DataLoss for bytes from a peer
  // with nothing to send, a bucket of the wrong size or a delta that does
  // not apply (`dst` may then be partly written).
  Status Unpack(size_t step, std::vector<std::vector<uint8_t>>& got,
                const std::vector<MutableBytes>& dst);

  // Run's steps (executor.cc). InvalidArgument unless the transport's
  // world, the plan's layouts and the caller's buffers fit the plan here.
  Status CheckRunArguments(const std::vector<ConstBytes>& src,
                           const std::vector<MutableBytes>& dst) const;
  // Step k's message to each peer (empty where it sends nothing): its
  // bucket, or, once this rank has `failed`, the one byte that says so
  // (its receivers skip its buckets and the agreement reports the cause).
  // Adds what goes to `st` and `*sent`.
  std::vector<ConstBytes> Outgoing(size_t k, bool failed, ReshardStats* st,
                                   int64_t* sent) const;
  // After a run: a receive buffer far larger than this run's largest
  // message from its peer (kept from a dense run, now that deltas are
  // small) is let go, and the learned speeds are kept for the next run.
  void Learn(const internal::RunTally& tally, ReshardStats* st);
};

}  // namespace hy::reshard

#endif  // HY_RESHARD_EXECUTOR_IMPL_H_
