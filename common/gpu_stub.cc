// GPU entry points for builds without CUDA (see gpu.h).

#include "hy/common/gpu.h"

namespace hy {

bool BuiltWithCuda() { return false; }
int GpuDeviceCount() { return 0; }
std::string GpuDeviceName(int) { return std::string(); }

Status GpuCastF32ToBf16(const uint32_t*, uint16_t*, size_t) {
  return Status::Unavailable("hy was built without CUDA");
}

Result<void*> GpuAlloc(size_t) {
  return Status::Unavailable("hy was built without CUDA");
}
void GpuFree(void*) {}

Result<void*> GpuHostAlloc(size_t) {
  return Status::Unavailable("hy was built without CUDA");
}
void GpuHostFree(void*) {}

Status GpuCopy(void*, const void*, size_t n) {
  if (n == 0) return Status::OK();
  return Status::Unavailable("hy was built without CUDA");
}

}  // namespace hy
