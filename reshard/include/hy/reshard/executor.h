// Executor: runs a TransferPlan for one rank over a Transport, on host
// buffers. Every rank of the plan runs its own Executor with the same plan;
// Run is collective.
//
// Per step, the executor packs what this rank sends to each peer into one
// bucket per peer (cast to the wire dtype, optionally delta-encoded), hands
// the buckets to Transport::AllToAllV and unpacks what arrives into the
// destination buffers. Packing step k+1 overlaps the exchange of step k;
// local copies (plan.local) overlap the packing of the first step and never
// touch the transport.
//
// Wire formats:
//   kRaw   elements travel in their own dtype.
//   kBf16  f32 tensors travel (and land) as bf16, rounded to nearest even
//          at the sender: bit-identical to casting at the destination.
//          Other dtypes travel raw.
// Sparse delta (ExecutorOptions::sparse_delta), on top of either: the
// sender keeps each bucket's full form as last sent (the bucket buffers
// it keeps anyway; the new values are cast over them as changes are
// found), the receiver's destination buffers are its previous copy, and
// each bucket
// carries only what changed: nothing for an unchanged bucket, else the
// smaller of index/value pairs and an XOR-delta chunk through the codec
// (byte grouping + zstd). Every delta bucket carries the checksum of the
// new bytes; a receiver whose previous copy was not what the sender last
// sent gets DataLoss, never a silently wrong tensor. The first Run (and
// the first after ResetDelta) sends everything.
//
// Thread-safety: an Executor is used by one thread at a time; it may use
// internal threads for packing. The plan is shared and read-only.

#ifndef HY_RESHARD_EXECUTOR_H_
#define HY_RESHARD_EXECUTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/dtype.h"
#include "hy/common/result.h"
#include "hy/reshard/plan.h"
#include "hy/reshard/transport.h"

namespace hy::metrics {
class HyMetrics;
}

namespace hy::reshard {

enum class WireFormat : uint8_t { kRaw, kBf16 };

const char* WireFormatName(WireFormat wire);

// The dtype a tensor of `src` dtype has on the wire and at the destination.
DType WireDType(DType src, WireFormat wire);

struct ExecutorOptions {
  WireFormat wire = WireFormat::kRaw;
  bool sparse_delta = false;
  // The link's bandwidth per rank, by which sparse delta picks each
  // bucket's form: pairs of changes, the codec's XOR delta (worth its
  // encode and decode time only on a slow link) or the plain wire dtype,
  // and whether to look for changes at all: finding them reads the bucket
  // and its previous copy, so where the link carries a byte faster than
  // the scan costs beyond packing the full form (both measured from this
  // executor's own packs; loopback, NVLink) the full form goes without
  // one. That choice is made with learn_link_speed only, whose measured
  // link is the one to trust (a constant describes a network, slower than
  // any scan: with one, every bucket is scanned).
  double link_bytes_per_second = 1.25e9;
  // Learn the link's speed from this executor's own exchanges instead:
  // after each run, the fastest of its steps that moved at least 1 MiB
  // (bytes this rank sent or received, whichever is more, over the
  // exchange's time) replaces it; runs that move less (deltas) keep the
  // last figure. link_bytes_per_second is the guess until then.
  bool learn_link_speed = false;
  // The sparse scan's speed (wire bytes per second of one packing thread)
  // for that choice; 0: measured from this executor's own scans (> 0 fixes
  // it, for tests).
  double scan_bytes_per_second = 0;
  // Threads that pack one step's buckets (one per peer) in parallel; 0:
  // the machine's hardware threads. Never more than the peers of a step.
  int pack_threads = 0;
  // Metrics to record each Run into (not owned; may be null). Direction is
  // a label: 0 train->rollout, 1 rollout->train.
  const metrics::HyMetrics* metrics = nullptr;
  int direction = 0;
};

struct ReshardStats {
  double plan_seconds = 0;  // Copied from the plan.
  double pack_seconds = 0;
  double transfer_seconds = 0;
  double unpack_seconds = 0;  // Includes the local copies.
  double total_seconds = 0;
  // Wire-dtype bytes of this rank's data before delta / compression.
  int64_t local_bytes = 0;
  int64_t same_node_bytes = 0;  // Sent by this rank.
  int64_t cross_node_bytes = 0;
  // Source-dtype bytes of the elements this rank sent to other ranks: what
  // a dense send without bf16 cast or sparse delta would carry.
  int64_t logical_bytes_sent = 0;
  int64_t wire_bytes_sent = 0;  // Bytes this rank actually handed over.
  int64_t wire_bytes_received = 0;
  // Sparse delta only: changed elements found (in a bucket that turned out
  // dense enough to go whole, those found before that was clear).
  int64_t changed_elements_sent = 0;
  int64_t buckets_unchanged = 0;  // Sparse delta only.
  // Buckets that went to a peer as a copy of another peer's (the same
  // source elements, e.g. to two dp replicas of one tp shard): packed,
  // cast and delta-encoded once.
  int64_t buckets_shared = 0;
  // Sparse delta only: buckets that went whole without a scan because the
  // link carries them faster than the scan finds their changes.
  int64_t buckets_full_by_cost = 0;
  // The link speed this run's choices used and the sparse scan's measured
  // speed (bytes of the wire form per second of one packing thread; 0 not
  // measured yet), after the run has updated them.
  double link_bytes_per_second = 0;
  double scan_bytes_per_second = 0;
  int steps = 0;

  // Adds another rank's figures (sums bytes, max of seconds).
  void Merge(const ReshardStats& other);
};

// Records one run's figures into `metrics`: the phase histograms, the
// bytes-by-kind counters, the logical bytes sent, the bytes actually sent
// (wire_bytes_sent, under the run's wire: raw, bf16 or delta) and
// hy_reshard_duration_seconds with labels from
// `direction` (0 train->rollout, 1 rollout->train), `transport` ("gloo",
// "nccl", anything else counts as "local") and the wire (sparse delta when
// `sparse_delta`). Both the host and the NCCL executor report through it.
void RecordReshardMetrics(const metrics::HyMetrics& metrics,
                          const ReshardStats& stats, int direction,
                          std::string_view transport, WireFormat wire,
                          bool sparse_delta);

class Executor {
 public:
  // REQUIRES: plan and transport outlive the executor.
  Executor(std::shared_ptr<const TransferPlan> plan, Transport* transport,
           ExecutorOptions options);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // src[t]: this rank's source shard of tensor t in its own dtype (empty
  // when it holds none); dst[t]: the destination shard in WireDType.
  // Returns InvalidArgument before anything moves if the transport's rank
  // or world size differ from the plan, or a buffer's size differs from
  // what the plan says; a transport error as the transport returns it;
  // DataLoss for a damaged or mismatched delta bucket. On error the
  // destination buffers are partly written and the delta state is reset.
  Status Run(const std::vector<ConstBytes>& src,
             const std::vector<MutableBytes>& dst, ReshardStats* stats);

  // Forgets the delta state: the next Run sends everything.
  void ResetDelta();

  // Hands back the memory this executor keeps between runs, for the time
  // it is idle (a colocated engine's generation and training phases): its
  // scratch buffers are freed, and under sparse delta each bucket's full
  // form (the copy the next delta is taken against) is written to a file
  // created in `dir` (unlinked at once, so nothing is left behind) and
  // freed; the next Run reads them back before it packs. Returns IOError
  // naming the file if it cannot be created or written: the buckets are
  // freed all the same and the delta state is reset. A Run that cannot
  // read them back resets it too. Either way the next Run sends
  // everything: the same result, more bytes. Parking a parked executor
  // does nothing.
  Status Park(const std::string& dir);

  const TransferPlan& plan() const { return *plan_; }

 private:
  struct Impl;
  std::shared_ptr<const TransferPlan> plan_;
  std::unique_ptr<Impl> impl_;
};

// Runs the plan for all ranks on threads of this process (the offline path
// and tests): src[r][t] / dst[r][t] as Executor::Run takes them per rank.
// `stats` (may be null) gets the merged figures.
Status ReshardInProcess(std::shared_ptr<const TransferPlan> plan,
                        const std::vector<std::vector<ConstBytes>>& src,
                        const std::vector<std::vector<MutableBytes>>& dst,
                        const ExecutorOptions& options, ReshardStats* stats);

}  // namespace hy::reshard

#endif  // HY_RESHARD_EXECUTOR_H_
