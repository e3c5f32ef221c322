#include "hy/trainer/config/device.h"

#include <cstdlib>
#include <string>

#include "hy/common/gpu.h"

namespace hy::trainer {

Result<Device> ChooseDevice(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  const std::string key = "trainer.device " + std::string(name) + ": ";
  if (name != "cuda") {
    return Status::InvalidArgument(key + "must be cpu or cuda");
  }
  if (!BuiltWithCuda()) {
    return Status::InvalidArgument(
        key + "this hyctl was built without CUDA (no nvcc at configure time)");
  }
  const int gpus = GpuDeviceCount();
  if (gpus == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return Status::InvalidArgument(
        key + "no CUDA device is visible on this machine" +
        (visible != nullptr
             ? " (CUDA_VISIBLE_DEVICES=\"" + std::string(visible) + "\")"
             : std::string()) +
        "; use trainer.device: cpu");
  }
  return Device::kCuda;
}

}  // namespace hy::trainer
