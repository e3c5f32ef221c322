// NcclCommunicator's collectives on f32 device buffers (builds with NCCL).

#include <chrono>
#include <string>
#include <thread>

#include "cuda_util.h"
#include "hy/reshard/nccl_executor.h"

namespace hy::reshard {

using nccl_internal::CudaStatus;
using nccl_internal::DeviceGuard;
using nccl_internal::NcclStatus;

Status NcclCommunicator::Impl::WaitEvent(cudaEvent_t done,
                                         const std::string& what) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (int spins = 0;; ++spins) {
    const cudaError_t e = cudaEventQuery(done);
    if (e == cudaSuccess) return Status::OK();
    if (e != cudaErrorNotReady) {
      Abort();
      return CudaStatus(what, e);
    }
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) state = r;
    if (state != ncclSuccess && state != ncclInProgress) {
      Status s = NcclStatus(what, state, comm);
      Abort();
      return s;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      Abort();
      return Status::DeadlineExceeded(what + ": timed out after " +
                                      std::to_string(timeout_ms) + " ms");
    }
    if (spins < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

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
