// CUDA and NCCL helpers of hy_reshard_nccl: errors as hy::Status, a scoped
// current-device switch, and the state behind NcclCommunicator.
//
// Internal to hy_reshard_nccl; only in builds with NCCL.
// Thread-safety: DeviceGuard affects the calling thread only; the
// communicator state follows NcclCommunicator's rules.

#ifndef HY_RESHARD_NCCL_CUDA_UTIL_H_
#define HY_RESHARD_NCCL_CUDA_UTIL_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <functional>
#include <string>

#include "hy/common/status.h"
#include "hy/reshard/nccl_executor.h"

namespace hy::reshard::nccl_internal {

// "<what>: <CUDA's error string>": ResourceExhausted for out-of-memory,
// Unavailable when no device or driver is usable, Internal otherwise.
Status CudaStatus(const std::string& what, cudaError_t e);

// "<what>: <NCCL's error string> (<NCCL's last message>)": Unavailable for
// remote and system errors (a peer or the network), Internal otherwise.
// `comm` may be null.
Status NcclStatus(const std::string& what, ncclResult_t r, ncclComm_t comm);

// Makes `device` current for the calling thread and restores the previous
// device when it goes out of scope.
class DeviceGuard {
 public:
  DeviceGuard() = default;
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  // Returns CudaStatus's error if the device cannot be made current.
  Status Set(int device);

 private:
  int previous_ = -1;
};

}  // namespace hy::reshard::nccl_internal

namespace hy::reshard {

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  bool aborted = false;
  int64_t timeout_ms = 0;

  // Waits until NCCL has finished what the communicator is doing (set-up,
  // enqueuing a group, finalising). Returns the async error as NcclStatus
  // does, or DeadlineExceeded after timeout_ms; on either the communicator is
  // aborted.
  Status WaitIdle(const std::string& what);
  // Returns Internal after aborting if `r` is neither success nor
  // in-progress, else waits as WaitIdle does.
  Status Check(const std::string& what, ncclResult_t r);
  // ncclCommAbort, once.
  void Abort();
  // Makes `device` current, calls `issue` (one NCCL call queued on
  // `stream`), waits for the call to be enqueued and then for the stream to
  // reach it, with timeout_ms, watching NCCL's asynchronous error; aborts
  // on failure (NcclCommunicator's collectives).
  Status RunAndWait(const std::string& what, int device, cudaStream_t stream,
                    const std::function<ncclResult_t(cudaStream_t)>& issue);
  // Waits for `event` as RunAndWait does.
  Status WaitEvent(cudaEvent_t event, const std::string& what);
  // The wait under WaitIdle and WaitEvent: calls probe(NCCL's asynchronous
  // state, &done) until it sets done, with timeout_ms; NCCL's error, the
  // probe's or the timeout aborts the communicator and is returned.
  Status Poll(
      const std::string& what,
      const std::function<Status(ncclResult_t state, bool* done)>& probe);
};

}  // namespace hy::reshard

#endif  // HY_RESHARD_NCCL_CUDA_UTIL_H_
