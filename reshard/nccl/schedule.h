// Schedule: one rank's share of a TransferPlan as device work, fixed when
// an NcclExecutor is created: the copy ops (copy_ops.h) of the local copies
// and, per plan step the rank takes part in, of packing its send buckets and
// unpacking its receive buckets, plus the bucket layout both ends of each
// ncclSend / ncclRecv agree on without exchanging sizes.
//
// Slots: a pack op reads slot t (source shard of tensor t) and writes the
// bucket; an unpack op reads the bucket and writes slot t (destination
// shard); a local op reads source slot t and writes destination slot t.
//
// Bucket layout: per step, the send buffer holds one bucket per destination
// rank in ascending rank order, each holding that pair's transfers in plan
// order, in the wire dtype, every transfer starting at a multiple of
// kBucketAlign bytes; a receiver lays out one bucket per source rank the
// same way. A transfer from this rank to itself inside a step (the planner
// puts those in plan.local, but a hand-made plan may not) is sent to self.
//
// Internal to hy_reshard_nccl and its tests. Pure host code.
// Thread-safety: BuildSchedule is a pure function; a Schedule is a value.

#ifndef HY_RESHARD_NCCL_SCHEDULE_H_
#define HY_RESHARD_NCCL_SCHEDULE_H_

#include <cstdint>
#include <vector>

#include "copy_ops.h"
#include "hy/common/result.h"
#include "hy/reshard/executor.h"
#include "hy/reshard/plan.h"

namespace hy::reshard::nccl_internal {

// One peer's bucket within a step's send or receive buffer.
struct PeerBucket {
  int peer = 0;
  int64_t offset = 0;  // Bytes from the buffer's start; kBucketAlign-aligned.
  int64_t bytes = 0;   // Including the padding of its transfers.
};

struct StepWork {
  int step = 0;  // Index into plan.steps.
  // Ranges of Schedule::ops.
  int64_t pack_begin = 0;
  int64_t pack_end = 0;
  int64_t unpack_begin = 0;
  int64_t unpack_end = 0;
  std::vector<PeerBucket> sends;  // Ascending peer; no empty buckets.
  std::vector<PeerBucket> recvs;
  int64_t send_bytes = 0;  // Size of the send buffer this step.
  int64_t recv_bytes = 0;
};

struct Schedule {
  std::vector<CopyOp> ops;
  int64_t local_end = 0;        // ops[0, local_end) are the local copies.
  std::vector<StepWork> steps;  // Only steps with work for this rank.
  int64_t max_send_bytes = 0;
  int64_t max_recv_bytes = 0;
  // Per Run, as ReshardStats counts them: wire-dtype bytes without
  // padding, then what NCCL moves (with padding).
  int64_t local_bytes = 0;
  int64_t same_node_bytes = 0;
  int64_t cross_node_bytes = 0;
  int64_t wire_bytes_sent = 0;
  int64_t wire_bytes_received = 0;
};

// Returns InvalidArgument if rank is not in the plan's world, the plan's
// shard maps disagree with its spec or topology, a tensor's dtype has no
// size or a wire conversion other than f32 -> bf16 is asked for, or a
// transfer of this rank names a tensor or rank that does not exist or
// elements outside the shard it reads or writes (so the kernels never go
// out of bounds).
Result<Schedule> BuildSchedule(const TransferPlan& plan, int rank,
                               WireFormat wire);

}  // namespace hy::reshard::nccl_internal

#endif  // HY_RESHARD_NCCL_SCHEDULE_H_
