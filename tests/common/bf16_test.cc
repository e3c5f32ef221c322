#include "hy/common/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace hy {
namespace {

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// The value of a bf16 bit pattern as a double, treating the pattern just past
// the largest finite value (exponent all ones, mantissa 0) as 2^128: that is
// the "next" representable magnitude the rounding rule compares against.
double Bf16Magnitude(uint32_t h) {
  const uint32_t exp = (h >> 7) & 0xFF;
  const uint32_t man = h & 0x7F;
  if (exp == 0) return std::ldexp(static_cast<double>(man), -133);
  return std::ldexp(static_cast<double>(128 + man),
                    static_cast<int>(exp) - 134);
}

// Reference round-to-nearest-even written from the definition, with double
// arithmetic instead of bit tricks.
uint16_t ReferenceRne(uint32_t bits) {
  const float f = FromBits(bits);
  const uint32_t sign = bits & 0x80000000u ? 0x8000u : 0;
  if (std::isnan(f)) return 0;  // Checked separately.
  if (std::isinf(f)) return static_cast<uint16_t>(sign | 0x7F80);
  const double x = std::fabs(static_cast<double>(f));
  const uint32_t lo = (bits & 0x7FFFFFFFu) >> 16;  // Truncation toward zero.
  const uint32_t hi = lo + 1;
  const double dlo = x - Bf16Magnitude(lo);
  const double dhi = Bf16Magnitude(hi) - x;
  uint32_t pick;
  if (dlo < dhi) {
    pick = lo;
  } else if (dhi < dlo) {
    pick = hi;
  } else {
    pick = (lo & 1) ? hi : lo;  // Tie: even mantissa.
  }
  return static_cast<uint16_t>(sign | pick);
}

void ExpectMatchesReference(uint32_t bits) {
  const uint16_t got = F32BitsToBf16Bits(bits);
  if (std::isnan(FromBits(bits))) {
    EXPECT_TRUE(std::isnan(Bf16BitsToFloat(got))) << std::hex << bits;
    EXPECT_EQ(got & 0x8000, (bits >> 16) & 0x8000) << std::hex << bits;
    return;
  }
  ASSERT_EQ(got, ReferenceRne(bits)) << "f32 bits 0x" << std::hex << bits;
}

TEST(Bf16Test, SpecialValues) {
  EXPECT_EQ(FloatToBf16Bits(0.0f), 0x0000);
  EXPECT_EQ(FloatToBf16Bits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBf16Bits(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16Bits(-2.0f), 0xC000);
  EXPECT_EQ(FloatToBf16Bits(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(FloatToBf16Bits(-std::numeric_limits<float>::infinity()), 0xFF80);
  // Largest float rounds up to infinity (it is past bf16 max + half ulp).
  EXPECT_EQ(FloatToBf16Bits(std::numeric_limits<float>::max()), 0x7F80);
  // A NaN whose payload is only in the dropped low bits stays NaN.
  EXPECT_TRUE(std::isnan(Bf16BitsToFloat(F32BitsToBf16Bits(0x7F800001u))));
  EXPECT_TRUE(std::isnan(Bf16BitsToFloat(F32BitsToBf16Bits(0xFF800001u))));
  EXPECT_TRUE(std::isnan(Bf16BitsToFloat(F32BitsToBf16Bits(0x7FC00000u))));
  // Smallest denormal rounds to zero (below half of bf16's smallest denormal).
  EXPECT_EQ(F32BitsToBf16Bits(0x00000001u), 0x0000);
  // Ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7: goes to even (1.0).
  EXPECT_EQ(F32BitsToBf16Bits(0x3F808000u), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between odd 0x3F81 and even 0x3F82.
  EXPECT_EQ(F32BitsToBf16Bits(0x3F818000u), 0x3F82);
}

TEST(Bf16Test, WideningIsExact) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Bf16BitsToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    // Narrowing an exactly representable value returns it unchanged.
    EXPECT_EQ(FloatToBf16Bits(f), h);
  }
}

TEST(Bf16Test, MatchesReferenceAroundEveryRoundingBoundary) {
  // For every bf16 pattern, the float32 values just below, at and just above
  // the midpoint to the next pattern, plus the ends of the interval:
  // this covers every tie, every carry into the exponent, the overflow to
  // infinity, and the whole denormal range.
  const uint32_t lows[] = {0x0000, 0x0001, 0x7FFF, 0x8000,
                           0x8001, 0xC000, 0xFFFF};
  for (uint32_t h = 0; h < 0x10000; ++h) {
    for (uint32_t low : lows) ExpectMatchesReference(h << 16 | low);
  }
}

TEST(Bf16Test, MatchesReferenceOnRandomBits) {
  std::mt19937 rng(42);
  for (int i = 0; i < 1000000; ++i) ExpectMatchesReference(rng());
}

TEST(Bf16Test, BufferCastAgreesWithScalarAtAnyAlignment) {
  std::mt19937 rng(7);
  const size_t n = 1000;
  std::vector<uint8_t> in(4 * n + 3), out(2 * n + 3), wide(4 * n + 3);
  for (auto& b : in) b = static_cast<uint8_t>(rng());
  for (size_t offset : {0u, 1u, 3u}) {
    CastF32ToBf16(in.data() + offset, out.data() + offset, n);
    WidenBf16ToF32(out.data() + offset, wide.data() + offset, n);
    for (size_t i = 0; i < n; ++i) {
      uint32_t x;
      uint16_t y;
      uint32_t w;
      std::memcpy(&x, in.data() + offset + 4 * i, 4);
      std::memcpy(&y, out.data() + offset + 2 * i, 2);
      std::memcpy(&w, wide.data() + offset + 4 * i, 4);
      ASSERT_EQ(y, F32BitsToBf16Bits(x)) << i;
      ASSERT_EQ(w, static_cast<uint32_t>(y) << 16) << i;
    }
  }
}

}  // namespace
}  // namespace hy
