// Internal to the planner: cutting network transfers into bounded steps.

#ifndef HY_RESHARD_PLAN_INTERNAL_H_
#define HY_RESHARD_PLAN_INTERNAL_H_

#include <vector>

#include "hy/reshard/plan.h"

namespace hy::reshard::internal {

// Groups `network` (transfers between different ranks) into plan->steps so
// that within a step no rank sends or receives more than
// plan->bucket_bytes (a single element larger than the bucket still goes,
// alone); fills the per-rank and peak-staging figures of plan->stats.
// REQUIRES: plan->spec, plan->topology and plan->bucket_bytes are set.
void CutSteps(std::vector<Transfer> network, TransferPlan* plan);

// Whether a and b take the same source elements (tensor, source offset,
// length), whatever their destinations: the planner cuts lists of such
// transfers in lockstep and the executor packs their bucket once.
inline bool SameSourceRun(const Transfer& a, const Transfer& b) {
  return a.tensor == b.tensor && a.src_offset == b.src_offset &&
         a.length == b.length;
}

}  // namespace hy::reshard::internal

#endif  // HY_RESHARD_PLAN_INTERNAL_H_
