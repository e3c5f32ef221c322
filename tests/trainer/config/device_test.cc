// trainer.device: the one choice of device, checked against this build and
// this machine (CI has no GPU; on a GPU machine the cuda case says the
// trainer's model has no CUDA path yet).

#include "hy/trainer/config/device.h"

#include <gtest/gtest.h>

#include <string>

#include "hy/common/gpu.h"

namespace hy::trainer {
namespace {

TEST(DeviceTest, CpuIsChosen) {
  auto d = ChooseDevice("cpu");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, Device::kCpu);
}

TEST(DeviceTest, UnknownNamesAreRefusedByName) {
  for (const char* name : {"tpu", "", "CUDA", "cuda:0"}) {
    auto d = ChooseDevice(name);
    ASSERT_FALSE(d.ok()) << name;
    EXPECT_TRUE(d.status().IsInvalidArgument()) << d.status();
    EXPECT_NE(d.status().ToString().find("must be cpu or cuda"),
              std::string::npos)
        << d.status();
  }
}

TEST(DeviceTest, CudaWhereThereIsOneElseSaysWhy) {
  auto d = ChooseDevice("cuda");
  if (BuiltWithCuda() && GpuDeviceCount() > 0) {
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(*d, Device::kCuda);
    return;
  }
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(d.status().IsInvalidArgument()) << d.status();
  const std::string why = d.status().ToString();
  EXPECT_NE(why.find("trainer.device cuda: "), std::string::npos) << why;
  const char* expected =
      !BuiltWithCuda() ? "built without CUDA" : "no CUDA device is visible";
  EXPECT_NE(why.find(expected), std::string::npos) << why;
}

}  // namespace
}  // namespace hy::trainer
