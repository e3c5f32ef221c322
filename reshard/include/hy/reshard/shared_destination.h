// The executor for a destination every source rank can write: a rollout
// engine's receive buffer that is a shared-memory file mapped by all the
// trainer's ranks on its host (trainer/vllm/weight_file.h). Each rank runs
// its own transfers of the plan straight from its source shards into the
// destination, cast on the way: no message, no staging, no rank ever holds
// more than its own shard. Ranks write disjoint bytes (the plan sends each
// destination element once), so they need no lock; the caller agrees on
// completion (a barrier) before the destination is read.
//
// Thread-safety: a free function; concurrent calls on one destination are
// safe when they are different ranks of one plan.

#ifndef HY_RESHARD_SHARED_DESTINATION_H_
#define HY_RESHARD_SHARED_DESTINATION_H_

#include <cstdint>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/dtype.h"
#include "hy/common/status.h"
#include "hy/reshard/plan.h"

namespace hy::reshard {

struct SharedDestinationStats {
  int64_t elements = 0;       // Written by this rank.
  int64_t bytes_written = 0;  // In the destination's dtype.
  double seconds = 0;
};

// Writes the elements `plan` sends from `rank` to destination rank
// `dst_rank` (local copies and network steps alike): src[t] is this rank's
// f32 source shard of tensor t, dst[t] destination rank dst_rank's shard of
// tensor t in `dst_dtype` (kF32 or kBF16, rounded to nearest even). Returns
// InvalidArgument for another dtype, a tensor count that differs from the
// plan's, or a transfer outside a buffer (nothing is written then).
Status RunToSharedDestination(const TransferPlan& plan, int rank, int dst_rank,
                              const std::vector<ConstBytes>& src,
                              const std::vector<MutableBytes>& dst,
                              DType dst_dtype,
                              SharedDestinationStats* stats = nullptr);

}  // namespace hy::reshard

#endif  // HY_RESHARD_SHARED_DESTINATION_H_
