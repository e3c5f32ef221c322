// Argument checks shared by the CUDA build of hy_reshard_nccl and its stub,
// so that both reject the same mistakes with the same InvalidArgument before
// the stub says Unavailable.
//
// Internal to hy_reshard_nccl. Thread-safety: pure functions.

#ifndef HY_RESHARD_NCCL_CHECKS_H_
#define HY_RESHARD_NCCL_CHECKS_H_

#include <memory>
#include <vector>

#include "copy_ops.h"
#include "hy/reshard/nccl_executor.h"

namespace hy::reshard::nccl_internal {

// GpuCopyRuns' arguments.
Status CheckCopyRuns(const std::vector<CopyRun>& runs, int elem_size,
                     bool cast);

// NcclCommunicator::Create's arguments (everything but the device).
Status CheckCommArgs(int rank, int world_size, const KeyValueStore* store,
                     const NcclCommOptions& options);

// NcclExecutor::Create's arguments that need no device.
Status CheckExecutorArgs(const TransferPlan* plan, const NcclCommunicator* comm,
                         const NcclExecutorOptions& options);

}  // namespace hy::reshard::nccl_internal

#endif  // HY_RESHARD_NCCL_CHECKS_H_
