// NcclCommunicator's collectives on f32 device buffers (builds with NCCL).

#include <string>

#include "cuda_util.h"
#include "hy/reshard/nccl_executor.h"

namespace hy::reshard {

using nccl_internal::CudaStatus;
using nccl_internal::DeviceGuard;
using nccl_internal::NcclStatus;

Status NcclCommunicator::Impl::RunAndWait(
    const std::string& what, int device, cudaStream_t stream,
    const std::function<ncclResult_t(cudaStream_t)>& issue) {
  if (aborted) {
    return Status::FailedPrecondition(what + ": the communicator was aborted");
  }
  DeviceGuard guard;
  HY_RETURN_IF_ERROR(guard.Set(device));
  HY_RETURN_IF_ERROR(Check(what, issue(stream)));  // Enqueued.
  cudaEvent_t done = nullptr;
  cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  if (e != cudaSuccess) return CudaStatus("cudaEventCreate", e);
  e = cudaEventRecord(done, stream);
  Status status = e == cudaSuccess ? WaitEvent(done, what)
                                   : CudaStatus("cudaEventRecord", e);
  (void)cudaEventDestroy(done);
  return status;
}

Status NcclCommunicator::AllGather(const float* send, float* recv, size_t count,
                                   void* stream) {
  if (count == 0) return Status::OK();
  if (send == nullptr || recv == nullptr) {
    return Status::InvalidArgument("NcclCommunicator::AllGather: null buffer");
  }
  ncclComm_t comm = impl_->comm;
  return impl_->RunAndWait(
      "ncclAllGather", device_, static_cast<cudaStream_t>(stream),
      [&](cudaStream_t s) {
        return ncclAllGather(send, recv, count, ncclFloat32, comm, s);
      });
}

Status NcclCommunicator::ReduceScatterSum(const float* send, float* recv,
                                          size_t count, void* stream) {
  if (count == 0) return Status::OK();
  if (send == nullptr || recv == nullptr) {
    return Status::InvalidArgument(
        "NcclCommunicator::ReduceScatterSum: null buffer");
  }
  ncclComm_t comm = impl_->comm;
  return impl_->RunAndWait(
      "ncclReduceScatter", device_, static_cast<cudaStream_t>(stream),
      [&](cudaStream_t s) {
        return ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, comm,
                                 s);
      });
}

Status NcclCommunicator::AllReduceSum(float* data, size_t count, void* stream) {
  if (count == 0) return Status::OK();
  if (data == nullptr) {
    return Status::InvalidArgument(
        "NcclCommunicator::AllReduceSum: null buffer");
  }
  ncclComm_t comm = impl_->comm;
  return impl_->RunAndWait(
      "ncclAllReduce", device_, static_cast<cudaStream_t>(stream),
      [&](cudaStream_t s) {
        return ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, s);
      });
}

}  // namespace hy::reshard
