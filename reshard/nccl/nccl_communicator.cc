// NcclCommunicator (builds with NCCL).

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "checks.h"
#include "cuda_util.h"
#include "hy/common/gpu.h"
#include "hy/reshard/nccl_executor.h"

namespace hy::reshard {

namespace nccl_internal {

Status NcclStatus(const std::string& what, ncclResult_t r, ncclComm_t comm) {
  std::string msg = what + ": " + ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') msg += std::string(" (") + last + ")";
  if (r == ncclRemoteError || r == ncclSystemError) {
    return Status::Unavailable(msg);
  }
  return Status::Internal(msg);
}

}  // namespace nccl_internal

using nccl_internal::CudaStatus;
using nccl_internal::DeviceGuard;
using nccl_internal::NcclStatus;

namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string ToHex(const ncclUniqueId& id) {
  std::string out;
  for (unsigned char c : id.internal) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool FromHex(const std::string& text, ncclUniqueId* id) {
  if (text.size() != 2 * sizeof(id->internal)) return false;
  for (size_t i = 0; i < sizeof(id->internal); ++i) {
    const int hi = HexDigit(text[2 * i]);
    const int lo = HexDigit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    id->internal[i] = static_cast<char>(hi << 4 | lo);
  }
  return true;
}

}  // namespace

// ---- NcclCommunicator::Impl -------------------------------------------------

Status NcclCommunicator::Impl::Poll(
    const std::string& what,
    const std::function<Status(ncclResult_t state, bool* done)>& probe) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (int spins = 0;; ++spins) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) state = r;
    if (state != ncclSuccess && state != ncclInProgress) {
      Status s = NcclStatus(what, state, comm);
      Abort();
      return s;
    }
    bool done = false;
    Status s = probe(state, &done);
    if (!s.ok()) {
      Abort();
      return s;
    }
    if (done) return Status::OK();
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

Status NcclCommunicator::Impl::WaitIdle(const std::string& what) {
  return Poll(what, [](ncclResult_t state, bool* done) {
    *done = state == ncclSuccess;
    return Status::OK();
  });
}

Status NcclCommunicator::Impl::WaitEvent(cudaEvent_t event,
                                         const std::string& what) {
  return Poll(what, [&](ncclResult_t, bool* done) {
    const cudaError_t e = cudaEventQuery(event);
    *done = e == cudaSuccess;
    return e == cudaSuccess || e == cudaErrorNotReady ? Status::OK()
                                                      : CudaStatus(what, e);
  });
}

Status NcclCommunicator::Impl::Check(const std::string& what, ncclResult_t r) {
  if (r != ncclSuccess && r != ncclInProgress) {
    Status s = NcclStatus(what, r, comm);
    Abort();
    return s;
  }
  return WaitIdle(what);
}

void NcclCommunicator::Impl::Abort() {
  if (aborted || comm == nullptr) return;
  aborted = true;
  (void)ncclCommAbort(comm);
}

// ---- NcclCommunicator -------------------------------------------------------

NcclCommunicator::NcclCommunicator(int rank, int world_size, int device,
                                   int64_t timeout_ms)
    : rank_(rank),
      world_size_(world_size),
      device_(device),
      timeout_ms_(timeout_ms),
      impl_(std::make_unique<Impl>()) {
  impl_->timeout_ms = timeout_ms;
}

NcclCommunicator::~NcclCommunicator() {
  if (impl_->comm == nullptr || impl_->aborted) return;
  DeviceGuard guard;
  (void)guard.Set(device_);
  // Finalize flushes outstanding work; a communicator that cannot finish
  // within the timeout is aborted instead (WaitIdle does that).
  if (impl_->Check("ncclCommFinalize", ncclCommFinalize(impl_->comm)).ok()) {
    (void)ncclCommDestroy(impl_->comm);
  }
}

bool NcclCommunicator::aborted() const { return impl_->aborted; }

Result<std::shared_ptr<NcclCommunicator>> NcclCommunicator::Create(
    int rank, int world_size, KeyValueStore* store,
    const NcclCommOptions& options) {
  HY_RETURN_IF_ERROR(
      nccl_internal::CheckCommArgs(rank, world_size, store, options));
  const int count = GpuDeviceCount();
  if (count == 0) {
    return Status::Unavailable(
        "NcclCommunicator: no CUDA device visible (no GPU, no driver, or "
        "CUDA_VISIBLE_DEVICES hides them)");
  }
  int device = options.device;
  if (device < 0) {
    const cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess) return CudaStatus("cudaGetDevice", e);
  }
  if (device >= count) {
    return Status::InvalidArgument("NcclCommunicator: device " +
                                   std::to_string(device) + " of " +
                                   std::to_string(count) + " visible");
  }
  DeviceGuard guard;
  HY_RETURN_IF_ERROR(guard.Set(device));

  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return NcclStatus("ncclGetUniqueId", r, nullptr);
    if (store != nullptr) {
      HY_RETURN_IF_ERROR(store->Set(options.store_key, ToHex(id)));
    }
  } else {
    HY_ASSIGN_OR_RETURN(const std::string text, store->Get(options.store_key));
    if (!FromHex(text, &id)) {
      return Status::InvalidArgument("NcclCommunicator: store key '" +
                                     options.store_key +
                                     "' does not hold an NCCL unique id");
    }
  }

  std::shared_ptr<NcclCommunicator> comm(
      new NcclCommunicator(rank, world_size, device, options.timeout_ms));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // Every wait goes through WaitIdle's timeout.
  ncclComm_t handle = nullptr;
  const ncclResult_t r =
      ncclCommInitRankConfig(&handle, world_size, id, rank, &config);
  comm->impl_->comm = handle;
  if (handle == nullptr && r != ncclSuccess && r != ncclInProgress) {
    return NcclStatus("ncclCommInitRankConfig", r, nullptr);
  }
  HY_RETURN_IF_ERROR(comm->impl_->Check("ncclCommInitRankConfig", r));
  return comm;
}

}  // namespace hy::reshard
