// The device a run trains on: the one place that reads trainer.device and
// checks it against this build and this machine. hyctl train's launcher
// asks before it starts a worker, and each worker asks again on its own
// host, so a device that cannot be used is a configuration error named
// once, never a crash or a hang in a collective.
//
// Thread-safety: a pure function of its argument and the machine.

#ifndef HY_TRAINER_CONFIG_DEVICE_H_
#define HY_TRAINER_CONFIG_DEVICE_H_

#include <string_view>

#include "hy/common/result.h"

namespace hy::trainer {

enum class Device { kCpu, kCuda };

// The device named `name` (trainer.device: "cpu" or "cuda"). Returns
// InvalidArgument naming the cause otherwise: an unknown name; cuda in a
// build without CUDA, or with no CUDA device visible (CUDA_VISIBLE_DEVICES
// is named when set). The worker checks one thing more on cuda, which
// needs LibTorch (this room does not include it): that the LibTorch it runs
// on was built with CUDA (trainer::Comm::FromEnv).
Result<Device> ChooseDevice(std::string_view name);

}  // namespace hy::trainer

#endif  // HY_TRAINER_CONFIG_DEVICE_H_
