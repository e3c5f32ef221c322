#include "checks.h"

#include <string>

namespace hy::reshard::nccl_internal {

Status CheckCopyRuns(const std::vector<CopyRun>& runs, int elem_size,
                     bool cast) {
  if (elem_size < 1 || (cast && elem_size != 4)) {
    return Status::InvalidArgument("GpuCopyRuns: element size " +
                                   std::to_string(elem_size) +
                                   (cast ? " for a f32 -> bf16 cast" : ""));
  }
  for (const CopyRun& run : runs) {
    if (run.src_offset < 0 || run.dst_offset < 0 || run.length < 0) {
      return Status::InvalidArgument(
          "GpuCopyRuns: negative run offset or "
          "length");
    }
  }
  return Status::OK();
}

Status CheckCommArgs(int rank, int world_size, const KeyValueStore* store,
                     const NcclCommOptions& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return Status::InvalidArgument("NcclCommunicator: rank " +
                                   std::to_string(rank) + " of world size " +
                                   std::to_string(world_size));
  }
  if (world_size > 1 && store == nullptr) {
    return Status::InvalidArgument(
        "NcclCommunicator: a KeyValueStore is needed for world_size > 1");
  }
  if (options.timeout_ms <= 0) {
    return Status::InvalidArgument("NcclCommunicator: timeout_ms must be > 0");
  }
  return Status::OK();
}

Status CheckExecutorArgs(const TransferPlan* plan, const NcclCommunicator* comm,
                         const NcclExecutorOptions& options) {
  if (plan == nullptr) return Status::InvalidArgument("NcclExecutor: no plan");
  if (options.sparse_delta) {
    return Status::InvalidArgument(
        "NcclExecutor: sparse delta is not supported on device buffers (use "
        "wire raw or bf16, or the host Executor)");
  }
  if (comm == nullptr) {
    return Status::InvalidArgument("NcclExecutor: no communicator");
  }
  return Status::OK();
}

}  // namespace hy::reshard::nccl_internal
