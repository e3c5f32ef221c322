#include "hy/common/gpu.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "hy/common/bf16.h"

namespace hy {
namespace {

TEST(GpuTest, WithoutDeviceReportsUnavailable) {
  if (GpuDeviceCount() > 0) GTEST_SKIP() << "a GPU is present";
  uint32_t in = 0;
  uint16_t out = 0;
  EXPECT_EQ(GpuCastF32ToBf16(&in, &out, 1).code(), StatusCode::kUnavailable);
  EXPECT_EQ(GpuDeviceName(0), "");
}

TEST(GpuTest, CastKernelMatchesCpu) {
  if (GpuDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::printf("GPU 0: %s\n", GpuDeviceName(0).c_str());
  std::mt19937 rng(3);
  std::vector<uint32_t> in(1 << 20);
  for (auto& x : in) x = rng();
  // Every boundary pattern too: ties, NaN payloads, overflow.
  for (uint32_t h = 0; h < 0x10000; ++h) in[h] = h << 16 | 0x8000;
  std::vector<uint16_t> gpu(in.size());
  ASSERT_TRUE(GpuCastF32ToBf16(in.data(), gpu.data(), in.size()).ok());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(gpu[i], F32BitsToBf16Bits(in[i])) << i;
  }
}

}  // namespace
}  // namespace hy
