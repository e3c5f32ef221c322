#include "hy/common/tensor_meta.h"

#include <gtest/gtest.h>

namespace hy {
namespace {

TEST(TensorMetaTest, SizesAndValidation) {
  TensorMeta m{"model.embed_tokens.weight", DType::kBF16, {32000, 4096}};
  EXPECT_TRUE(m.Validate().ok());
  EXPECT_EQ(*m.NumElements(), 32000 * 4096);
  EXPECT_EQ(*m.ByteSize(), int64_t{32000} * 4096 * 2);
  EXPECT_EQ(m.DebugString(), "model.embed_tokens.weight BF16[32000,4096]");

  TensorMeta scalar{"step", DType::kI64, {}};
  EXPECT_EQ(*scalar.NumElements(), 1);
  EXPECT_EQ(*scalar.ByteSize(), 8);

  TensorMeta empty{"e", DType::kF32, {0, 5}};
  EXPECT_EQ(*empty.ByteSize(), 0);
}

TEST(TensorMetaTest, RejectsBadMetadata) {
  EXPECT_TRUE(
      (TensorMeta{"", DType::kF32, {2}}).Validate().IsInvalidArgument());
  EXPECT_TRUE(
      (TensorMeta{"x", DType::kF32, {2, -1}}).Validate().IsInvalidArgument());
  EXPECT_TRUE((TensorMeta{"x", static_cast<DType>(99), {2}})
                  .Validate()
                  .IsInvalidArgument());
  // 2^62 elements fit in int64, 2^62 * 4 bytes do not.
  TensorMeta huge{"x", DType::kF32, {int64_t{1} << 31, int64_t{1} << 31}};
  EXPECT_TRUE(huge.NumElements().ok());
  EXPECT_TRUE(huge.ByteSize().status().IsInvalidArgument());
  TensorMeta overflow{"x", DType::kU8, {int64_t{1} << 40, int64_t{1} << 40}};
  EXPECT_TRUE(overflow.NumElements().status().IsInvalidArgument());
}

TEST(TensorMetaTest, Equality) {
  TensorMeta a{"w", DType::kF32, {2, 3}};
  TensorMeta b = a;
  EXPECT_EQ(a, b);
  b.shape = {3, 2};
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace hy
