// GPU entry points for builds with CUDA (see gpu.h).

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "hy/common/bf16.h"
#include "hy/common/gpu.h"

namespace hy {

namespace {

__global__ void CastF32ToBf16Kernel(const uint32_t* __restrict__ in,
                                    uint16_t* __restrict__ out, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < n; i += stride) {
    const uint32_t bits = in[i];
    const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
    out[i] = static_cast<uint16_t>(
        (bits & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
  }
}

Status CudaError(const char* what, cudaError_t e) {
  return Status::Internal(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

bool BuiltWithCuda() { return true; }

int GpuDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // Clear the sticky "no driver" error.
    return 0;
  }
  return n;
}

std::string GpuDeviceName(int ordinal) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string();
  }
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ")";
}

Status GpuCastF32ToBf16(const uint32_t* in, uint16_t* out, size_t n) {
  if (GpuDeviceCount() == 0) return Status::Unavailable("no CUDA device");
  if (n == 0) return Status::OK();
  uint32_t* d_in = nullptr;
  uint16_t* d_out = nullptr;
  cudaError_t e = cudaMalloc(&d_in, n * sizeof(uint32_t));
  if (e == cudaSuccess) e = cudaMalloc(&d_out, n * sizeof(uint16_t));
  if (e == cudaSuccess) {
    e = cudaMemcpy(d_in, in, n * sizeof(uint32_t), cudaMemcpyHostToDevice);
  }
  if (e == cudaSuccess) {
    const int threads = 256;
    const size_t want = (n + threads - 1) / threads;
    const int blocks = static_cast<int>(want < 65535 ? want : 65535);
    CastF32ToBf16Kernel<<<blocks, threads>>>(d_in, d_out, n);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) {
    e = cudaMemcpy(out, d_out, n * sizeof(uint16_t), cudaMemcpyDeviceToHost);
  }
  cudaFree(d_in);
  cudaFree(d_out);
  if (e != cudaSuccess) return CudaError("GpuCastF32ToBf16", e);
  return Status::OK();
}

Result<void*> GpuAlloc(size_t n) {
  if (GpuDeviceCount() == 0) return Status::Unavailable("no CUDA device");
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, n == 0 ? 1 : n);
  if (e != cudaSuccess) return CudaError("cudaMalloc", e);
  return p;
}

void GpuFree(void* p) {
  if (p != nullptr) cudaFree(p);
}

Result<void*> GpuHostAlloc(size_t n) {
  if (GpuDeviceCount() == 0) return Status::Unavailable("no CUDA device");
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, n == 0 ? 1 : n, cudaHostAllocDefault);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::ResourceExhausted("cudaHostAlloc of " + std::to_string(n) +
                                     " bytes: " + cudaGetErrorString(e));
  }
  return p;
}

void GpuHostFree(void* p) {
  if (p != nullptr) cudaFreeHost(p);
}

Status GpuCopy(void* dst, const void* src, size_t n) {
  if (n == 0) return Status::OK();
  if (GpuDeviceCount() == 0) return Status::Unavailable("no CUDA device");
  // The device side's device runs the copy (a store thread's current
  // device is 0 whatever GPU the rank uses).
  int device = -1;
  for (const void* p : {src, const_cast<const void*>(dst)}) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) == cudaSuccess &&
        a.type == cudaMemoryTypeDevice) {
      device = a.device;
    }
  }
  (void)cudaGetLastError();  // A host pointer may leave an error behind.
  cudaError_t e = cudaSuccess;
  if (device >= 0) {
    e = cudaSetDevice(device);
    if (e != cudaSuccess) return CudaError("cudaSetDevice", e);
  } else {
    e = cudaGetDevice(&device);
    if (e != cudaSuccess) return CudaError("cudaGetDevice", e);
  }
  // One stream and one event per thread and device, for the life of the
  // process (cheap; the driver reclaims them at exit).
  struct PerDevice {
    cudaStream_t stream = nullptr;
    cudaEvent_t queued = nullptr;
  };
  thread_local std::vector<PerDevice> per_device;
  if (per_device.size() <= static_cast<size_t>(device)) {
    per_device.resize(device + 1);
  }
  PerDevice& d = per_device[device];
  if (d.stream == nullptr) {
    e = cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) {
      e = cudaEventCreateWithFlags(&d.queued, cudaEventDisableTiming);
    }
    if (e != cudaSuccess) {
      d.stream = nullptr;
      return CudaError("cudaStreamCreateWithFlags", e);
    }
  }
  // After the work already queued on the device's legacy default stream
  // (LibTorch's default stream: the step that wrote these bytes), which a
  // non-blocking stream does not otherwise wait for; not after work queued
  // later.
  e = cudaEventRecord(d.queued, cudaStreamLegacy);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(d.stream, d.queued, 0);
  if (e != cudaSuccess) return CudaError("GpuCopy: ordering", e);
  cudaStream_t stream = d.stream;
  e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return CudaError("GpuCopy", e);
  return Status::OK();
}

}  // namespace hy
