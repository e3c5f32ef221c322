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

}  // namespace hy

#endif  // HY_COMMON_GPU_H_
