// The transfer planner: turns "layout A -> layout B" for one model into the
// runs of elements each rank sends to each other rank.
//
// Rules, in order:
//   1. A region the destination rank already holds under the source layout
//      is copied locally (no network).
//   2. Otherwise, among the source ranks that hold it (dp replicas), prefer
//      one on the destination's node, then the one with the fewest bytes
//      assigned so far (balance per sender).
//   3. Network transfers are cut into steps: within a step no rank sends
//      more than bucket_bytes in all nor receives more than bucket_bytes in
//      all, so staging memory is bounded by the bucket, never a second copy
//      of the model.
// Every element a destination needs is sent exactly once and only when it
// is not already local, so cross-rank bytes equal the lower bound for the
// two layouts' rank assignments. With the HybridFlow grouping
// (RolloutLayoutFor) each rank's training shard lies inside its rollout
// shard, and for training tp=t,pp=p,dp=d -> rollout tp=t_g every rank
// receives exactly (t*p - t_g) / (t_g * t * p) * M bytes of an M-byte
// model: the paper's optimum with p_g = 1.
//
// Thread-safety: Plan is a pure function; a TransferPlan is an immutable
// value once built and may be shared by many executors (threads).

#ifndef HY_RESHARD_PLAN_H_
#define HY_RESHARD_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/reshard/layout.h"
#include "hy/reshard/model_spec.h"
#include "hy/reshard/shard_map.h"

namespace hy::reshard {

// Which rank runs on which node. Node of rank r: r / ranks_per_node.
struct Topology {
  int world_size = 1;
  int ranks_per_node = 8;

  int NodeOf(int rank) const { return rank / ranks_per_node; }
};

// `length` elements of tensor `tensor`, from offset `src_offset` of
// src_rank's source shard buffer to offset `dst_offset` of dst_rank's
// destination shard buffer (local-buffer offsets, in elements).
struct Transfer {
  int tensor = 0;
  int src_rank = 0;
  int dst_rank = 0;
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
  int64_t length = 0;
};

// One bounded exchange: every rank sends and receives at most bucket_bytes.
struct Step {
  // Sorted by (src_rank, dst_rank), then in the order they are packed.
  std::vector<Transfer> transfers;
};

struct PlanStats {
  int64_t local_bytes = 0;       // Copied within a rank.
  int64_t same_node_bytes = 0;   // Sent between ranks of one node.
  int64_t cross_node_bytes = 0;  // Sent between nodes.
  // Largest send + receive staging of one rank in one step, plus the next
  // step's send buffer packed while the current one is in flight.
  int64_t peak_staging_bytes = 0;
  int64_t max_send_bytes = 0;     // Most bytes any one rank sends in all.
  int64_t max_recv_bytes = 0;     // Most bytes any one rank receives.
  int64_t num_transfers = 0;      // Network runs (after merging).
  int64_t dst_bytes = 0;          // Bytes of all destination shards.
  double plan_seconds = 0;

  int64_t network_bytes() const { return same_node_bytes + cross_node_bytes; }
};

struct PlanOptions {
  int64_t bucket_bytes = int64_t{64} << 20;
};

struct TransferPlan {
  ModelSpec spec;
  ShardMap src;
  ShardMap dst;
  Topology topology;
  int64_t bucket_bytes = 0;
  std::vector<Transfer> local;  // src_rank == dst_rank.
  std::vector<Step> steps;
  PlanStats stats;

  // A stable digest of everything above: ranks exchanging delta state check
  // they hold the same plan.
  uint64_t Fingerprint() const;
  // A few lines: layouts, bytes by kind, steps, peak staging.
  std::string Summary() const;
};

// The layouts may have different world sizes (a job that grows or
// shrinks): topology.world_size is then the larger, the ranks beyond the
// source's world hold nothing and those beyond the destination's receive
// nothing. An executor runs such a plan in the larger world (every rank of
// it takes part; e.g. a gather of fsdp=N onto one rank's whole copy).
// Returns InvalidArgument before planning if topology.world_size is not
// the larger layout's world size ("world size mismatch: ..."), if
// topology.ranks_per_node < 1, if bucket_bytes < 1, or as ShardMap::Build
// does (a layout that does not divide a tensor dimension).
Result<TransferPlan> Plan(const Layout& src, const Layout& dst,
                          const ModelSpec& spec, const Topology& topology,
                          const PlanOptions& options = PlanOptions());

// `plan` with its local copies moved, round robin, into `num_steps` steps,
// so that each rank sends them to and receives them from itself: for
// exercising and measuring an executor's pack / exchange / unpack path on
// a single device. The stats count the moved bytes as same-node traffic
// (staging summed over ranks: exact for a one-rank plan).
// REQUIRES: num_steps >= 1 and plan.steps is empty (an all-local plan).
TransferPlan LocalCopiesAsSteps(const TransferPlan& plan, int num_steps);

// The part of `plan` that the ranks with from[rank] true send: their local
// copies and network transfers, steps left with nothing dropped. For a
// destination some ranks write themselves (RunToSharedDestination: a
// shared-memory file on their host) while the others reach it over a
// transport: every rank runs an Executor on the part from the others.
// The stats count the part's bytes by kind, its transfers and its largest
// send and receive; peak staging is the whole plan's (an upper bound).
// REQUIRES: from.size() == plan.topology.world_size.
TransferPlan PlanFromRanks(const TransferPlan& plan,
                           const std::vector<bool>& from);

// The HybridFlow rollout grouping for a training layout tp=t,pp=p,dp=d
// (fsdp=1): rollout tp=t_g, dp=world/t_g, ordered so that each rank's
// rollout TP slice contains its training TP slice ("order=dp:k-tp-dp" with
// k = t/t_g). Returns InvalidArgument unless t_g divides t and the training
// layout has fsdp == 1 and the default order.
Result<Layout> RolloutLayoutFor(const Layout& train, int rollout_tp);

}  // namespace hy::reshard

#endif  // HY_RESHARD_PLAN_H_
