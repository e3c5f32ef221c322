// Device helpers (builds with CUDA): CUDA errors as Status, DeviceGuard,
// DeviceBuffer and the one-shot GpuCopyRuns.

#include <string>
#include <vector>

#include "checks.h"
#include "copy_ops.h"
#include "cuda_util.h"
#include "hy/common/gpu.h"
#include "hy/reshard/nccl_executor.h"

namespace hy::reshard {

namespace nccl_internal {

Status CudaStatus(const std::string& what, cudaError_t e) {
  const std::string msg = what + ": " + cudaGetErrorString(e);
  switch (e) {
    case cudaErrorMemoryAllocation:
      return Status::ResourceExhausted(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return Status::Unavailable(msg);
    default:
      return Status::Internal(msg);
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

Status DeviceGuard::Set(int device) {
  int current = 0;
  cudaError_t e = cudaGetDevice(&current);
  if (e != cudaSuccess) return CudaStatus("cudaGetDevice", e);
  if (current == device) return Status::OK();
  e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    return CudaStatus("cudaSetDevice(" + std::to_string(device) + ")", e);
  }
  if (previous_ < 0) previous_ = current;
  return Status::OK();
}

Status GpuCopyRuns(const void* src, void* dst, const std::vector<CopyRun>& runs,
                   int elem_size, bool cast) {
  HY_RETURN_IF_ERROR(CheckCopyRuns(runs, elem_size, cast));
  if (GpuDeviceCount() == 0) return Status::Unavailable("no CUDA device");
  std::vector<CopyOp> ops;
  const int dst_size = cast ? 2 : elem_size;
  for (const CopyRun& run : runs) {
    AppendCopy(0, run.src_offset * elem_size, 0, run.dst_offset * dst_size,
               run.length, elem_size, cast, &ops);
  }
  if (ops.empty()) return Status::OK();
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return CudaStatus("cudaGetDevice", e);
  // Pointer table (source, destination), then the ops.
  const void* table[2] = {src, dst};
  HY_ASSIGN_OR_RETURN(DeviceBuffer mem,
                      DeviceBuffer::Allocate(
                          device, sizeof(table) + ops.size() * sizeof(CopyOp)));
  HY_RETURN_IF_ERROR(mem.CopyFromHost(ConstBytes(table, sizeof(table))));
  HY_RETURN_IF_ERROR(mem.CopyFromHost(
      ConstBytes(ops.data(), ops.size() * sizeof(CopyOp)), sizeof(table)));
  auto* d_table = reinterpret_cast<uint8_t**>(mem.data());
  HY_RETURN_IF_ERROR(
      LaunchCopyOps(reinterpret_cast<const CopyOp*>(mem.data() + sizeof(table)),
                    static_cast<int64_t>(ops.size()), d_table, d_table + 1,
                    nullptr, nullptr, nullptr));
  e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return CudaStatus("GpuCopyRuns: kernel", e);
  return Status::OK();
}

}  // namespace nccl_internal

using nccl_internal::CudaStatus;
using nccl_internal::DeviceGuard;

// ---- DeviceBuffer -----------------------------------------------------------

Result<DeviceBuffer> DeviceBuffer::Allocate(int device, size_t bytes) {
  const int count = GpuDeviceCount();
  if (count == 0) return Status::Unavailable("DeviceBuffer: no CUDA device");
  if (device < 0 || device >= count) {
    return Status::InvalidArgument("DeviceBuffer: device " +
                                   std::to_string(device) + " of " +
                                   std::to_string(count) + " visible");
  }
  DeviceBuffer buffer;
  buffer.device_ = device;
  if (bytes == 0) return buffer;
  DeviceGuard guard;
  HY_RETURN_IF_ERROR(guard.Set(device));
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return CudaStatus("cudaMalloc(" + std::to_string(bytes) + ")", e);
  }
  buffer.data_ = static_cast<uint8_t*>(p);
  buffer.size_ = bytes;
  return buffer;
}

DeviceBuffer::~DeviceBuffer() { Release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(other.data_), size_(other.size_), device_(other.device_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = other.data_;
    size_ = other.size_;
    device_ = other.device_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void DeviceBuffer::Release() {
  if (data_ != nullptr) (void)cudaFree(data_);
  data_ = nullptr;
  size_ = 0;
}

Status DeviceBuffer::CopyFromHost(ConstBytes host, size_t offset) {
  if (offset > size_ || host.size() > size_ - offset) {
    return Status::InvalidArgument("DeviceBuffer::CopyFromHost: range");
  }
  if (host.empty()) return Status::OK();
  const cudaError_t e = cudaMemcpy(data_ + offset, host.data(), host.size(),
                                   cudaMemcpyHostToDevice);
  if (e != cudaSuccess) return CudaStatus("cudaMemcpy to device", e);
  return Status::OK();
}

Status DeviceBuffer::CopyToHost(size_t offset, MutableBytes host) const {
  if (offset > size_ || host.size() > size_ - offset) {
    return Status::InvalidArgument("DeviceBuffer::CopyToHost: range");
  }
  if (host.empty()) return Status::OK();
  const cudaError_t e = cudaMemcpy(host.data(), data_ + offset, host.size(),
                                   cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return CudaStatus("cudaMemcpy to host", e);
  return Status::OK();
}

Status DeviceBuffer::Fill(uint8_t value) {
  if (size_ == 0) return Status::OK();
  DeviceGuard guard;
  HY_RETURN_IF_ERROR(guard.Set(device_));
  cudaError_t e = cudaMemset(data_, value, size_);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return CudaStatus("cudaMemset", e);
  return Status::OK();
}

}  // namespace hy::reshard
