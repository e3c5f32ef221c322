// Minimal GPU facilities shared by the modules that use CUDA.
//
// Everything here compiles with or without the CUDA toolkit: without it (or
// with -DHY_WITH_CUDA=OFF) GpuDeviceCount() is 0 and the other functions
// return Unavailable, so callers and tests decide at run time, not at build
// time, whether a GPU path runs.
//
// Thread-safety: all functions may be called from any thread.

#ifndef HY_COMMON_GPU_H_
#define HY_COMMON_GPU_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "hy/common/result.h"
#include "hy/common/status.h"

namespace hy {

// True when this build contains CUDA code.
bool BuiltWithCuda();

// Number of usable CUDA devices; 0 without CUDA, driver or device.
int GpuDeviceCount();

// "NVIDIA H100 80GB HBM3 (sm_90)" for device `ordinal`; empty if none.
std::string GpuDeviceName(int ordinal);

// Casts n float32 values (as bits) to bf16 round-to-nearest-even on GPU 0,
// bit-identical to hy::CastF32ToBf16: copies in, runs the kernel, copies out.
// Returns Unavailable without a GPU, Internal if a CUDA call fails.
Status GpuCastF32ToBf16(const uint32_t* in, uint16_t* out, size_t n);

// Device memory (cudaMalloc on the current device), for tests and benches
// that need a device buffer. Returns Unavailable without a GPU; GpuFree of
// null does nothing.
Result<void*> GpuAlloc(size_t n);
void GpuFree(void* p);

// Page-locked host memory (cudaHostAlloc): device-to-host copies into it
// run at the link's speed without a bounce through pageable memory.
// Returns Unavailable without a GPU, ResourceExhausted when the driver
// cannot lock that much; GpuHostFree of null does nothing.
Result<void*> GpuHostAlloc(size_t n);
void GpuHostFree(void* p);

// Copies n bytes between host and device memory, either way (the
// direction comes from unified addressing), on a non-blocking stream of the
// calling thread's own on the device that holds the device side, ordered
// after the work queued so far on that device's legacy default stream
// (LibTorch's default: the kernels that wrote the bytes), and waits for
// that stream only: work queued later on other streams goes on. Returns
// Unavailable without a GPU, Internal naming the CUDA error otherwise.
Status GpuCopy(void* dst, const void* src, size_t n);

}  // namespace hy

#endif  // HY_COMMON_GPU_H_
