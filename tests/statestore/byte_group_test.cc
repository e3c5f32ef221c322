#include "byte_group.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace hy::statestore::internal {
namespace {

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(ByteGroupTest, GroupsBytePlanes) {
  // Three 4-byte elements: plane j holds byte j of every element.
  const std::vector<uint8_t> in = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23};
  std::vector<uint8_t> out(in.size());
  GroupBytes(in.data(), 3, 4, out.data());
  EXPECT_EQ(out,
            (std::vector<uint8_t>{0, 10, 20, 1, 11, 21, 2, 12, 22, 3, 13, 23}));
}

TEST(ByteGroupTest, UngroupInvertsGroupForEveryElementSize) {
  for (size_t es : {1u, 2u, 3u, 4u, 8u}) {
    for (size_t n : {0u, 1u, 7u, 64u, 1001u}) {
      auto in = RandomBytes(n * es, static_cast<uint32_t>(es * 1000 + n));
      std::vector<uint8_t> mid(in.size()), back(in.size());
      GroupBytes(in.data(), n, es, mid.data());
      UngroupBytes(mid.data(), n, es, back.data());
      EXPECT_EQ(back, in) << "es=" << es << " n=" << n;
    }
  }
}

TEST(ByteGroupTest, ExponentSplitBf16PutsExponentInPlaneZero) {
  // 1.0 = 0x3F80: exponent 127, mantissa 0, sign 0.
  // -1.5 = 0xBFC0: exponent 127, mantissa 0x40, sign 1.
  const uint16_t vals[] = {0x3F80, 0xBFC0};
  std::vector<uint8_t> out(4);
  SplitExponentBf16(reinterpret_cast<const uint8_t*>(vals), 2, out.data());
  EXPECT_EQ(out, (std::vector<uint8_t>{127, 127, 0x00, 0xC0}));
}

TEST(ByteGroupTest, ExponentSplitF32PutsExponentInPlaneZero) {
  // -1.5f = 0xBFC00000: exponent 127, mantissa 0x400000, sign 1.
  const uint32_t val = 0xBFC00000u;
  std::vector<uint8_t> out(4);
  SplitExponentF32(reinterpret_cast<const uint8_t*>(&val), 1, out.data());
  EXPECT_EQ(out, (std::vector<uint8_t>{127, 0x00, 0x00, 0xC0}));
}

TEST(ByteGroupTest, ExponentSplitsAreBijective) {
  for (size_t n : {0u, 1u, 33u, 4096u}) {
    auto in2 = RandomBytes(2 * n, 5);
    std::vector<uint8_t> mid2(in2.size()), back2(in2.size());
    SplitExponentBf16(in2.data(), n, mid2.data());
    MergeExponentBf16(mid2.data(), n, back2.data());
    EXPECT_EQ(back2, in2) << n;
    auto in4 = RandomBytes(4 * n, 6);
    std::vector<uint8_t> mid4(in4.size()), back4(in4.size());
    SplitExponentF32(in4.data(), n, mid4.data());
    MergeExponentF32(mid4.data(), n, back4.data());
    EXPECT_EQ(back4, in4) << n;
  }
}

// Every plane byte from its definition, element by element, at lengths that
// take the 32-element SIMD steps and the loop after them.
TEST(ByteGroupTest, ExponentSplitsMatchTheirDefinition) {
  for (size_t n : {31u, 32u, 1000u, 4103u}) {
    auto in4 = RandomBytes(4 * n, 7);
    std::vector<uint8_t> out4(in4.size());
    SplitExponentF32(in4.data(), n, out4.data());
    for (size_t i = 0; i < n; ++i) {
      uint32_t v;
      std::memcpy(&v, in4.data() + 4 * i, 4);
      ASSERT_EQ(out4[i], (v >> 23) & 0xFF) << n << " " << i;
      ASSERT_EQ(out4[n + i], v & 0xFF) << n << " " << i;
      ASSERT_EQ(out4[2 * n + i], (v >> 8) & 0xFF) << n << " " << i;
      ASSERT_EQ(out4[3 * n + i], ((v >> 24) & 0x80) | ((v >> 16) & 0x7F))
          << n << " " << i;
    }
    auto in2 = RandomBytes(2 * n, 8);
    std::vector<uint8_t> out2(in2.size());
    SplitExponentBf16(in2.data(), n, out2.data());
    for (size_t i = 0; i < n; ++i) {
      const uint16_t v =
          static_cast<uint16_t>(in2[2 * i] | in2[2 * i + 1] << 8);
      ASSERT_EQ(out2[i], (v >> 7) & 0xFF) << n << " " << i;
      ASSERT_EQ(out2[n + i], ((v >> 8) & 0x80) | (v & 0x7F)) << n << " " << i;
    }
  }
}

TEST(ByteGroupTest, XorBytesIsItsOwnInverse) {
  auto a = RandomBytes(1027, 1);
  auto b = RandomBytes(1027, 2);
  std::vector<uint8_t> x(a.size());
  XorBytes(a.data(), b.data(), a.size(), x.data());
  EXPECT_EQ(x[5], a[5] ^ b[5]);
  EXPECT_EQ(x[1026], a[1026] ^ b[1026]);
  XorBytes(x.data(), b.data(), x.size(), x.data());  // In place.
  EXPECT_EQ(x, a);
}

}  // namespace
}  // namespace hy::statestore::internal
