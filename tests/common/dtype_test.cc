#include "hy/common/dtype.h"

#include <gtest/gtest.h>

#include <set>

namespace hy {
namespace {

TEST(DTypeTest, SizesMatchTheTypes) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
  EXPECT_EQ(DTypeSize(DType::kI32), 4u);
  EXPECT_EQ(DTypeSize(DType::kI8), 1u);
  EXPECT_EQ(DTypeSize(DType::kU8), 1u);
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_EQ(DTypeSize(static_cast<DType>(200)), 0u);
}

TEST(DTypeTest, SafetensorsNamesRoundTrip) {
  std::set<std::string_view> seen;
  for (DType d : kAllDTypes) {
    std::string_view name = SafetensorsName(d);
    EXPECT_TRUE(seen.insert(name).second) << name;
    Result<DType> back = DTypeFromSafetensorsName(name);
    ASSERT_TRUE(back.ok()) << name;
    EXPECT_EQ(*back, d);
  }
  EXPECT_EQ(SafetensorsName(DType::kBF16), "BF16");
  EXPECT_EQ(SafetensorsName(DType::kBool), "BOOL");
  EXPECT_TRUE(DTypeFromSafetensorsName("F8_E4M3").status().IsInvalidArgument());
  EXPECT_TRUE(DTypeFromSafetensorsName("f32").status().IsInvalidArgument());
}

TEST(DTypeTest, CodesAreStableAndChecked) {
  // These numbers are on disk; changing one breaks every existing store.
  EXPECT_EQ(static_cast<int>(DType::kF32), 1);
  EXPECT_EQ(static_cast<int>(DType::kBF16), 2);
  EXPECT_EQ(static_cast<int>(DType::kBool), 9);
  for (DType d : kAllDTypes) {
    EXPECT_EQ(*DTypeFromCode(static_cast<uint8_t>(d)), d);
  }
  EXPECT_TRUE(DTypeFromCode(0).status().IsDataLoss());
  EXPECT_TRUE(DTypeFromCode(10).status().IsDataLoss());
}

}  // namespace
}  // namespace hy
