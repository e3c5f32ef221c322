// Synthetic tensor data for the codec tests.

#ifndef HY_TESTS_STATESTORE_CODEC_TEST_UTIL_H_
#define HY_TESTS_STATESTORE_CODEC_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hy/common/bf16.h"
#include "hy/common/dtype.h"

namespace hy::statestore::testing {

// n bytes that look like weights of `dtype`: Gaussian(0, 0.02) for floats,
// small integers for integer types, random bits for bool/u8.
inline std::vector<uint8_t> WeightLikeBytes(DType dtype, size_t n,
                                            uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 0.02f);
  std::vector<uint8_t> out(n);
  const size_t es = DTypeSize(dtype);
  const size_t count = n / es;
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = out.data() + i * es;
    const float f = gauss(rng);
    switch (dtype) {
      case DType::kF32:
        std::memcpy(p, &f, 4);
        break;
      case DType::kF64: {
        const double d = f;
        std::memcpy(p, &d, 8);
        break;
      }
      case DType::kBF16: {
        const uint16_t h = FloatToBf16Bits(f);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kF16: {  // Crude f16: sign, exponent 14, random mantissa.
        const uint16_t h = static_cast<uint16_t>((rng() & 0x83FF) | 0x3800);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kI64: {
        const int64_t v = static_cast<int64_t>(rng() % 50000);
        std::memcpy(p, &v, 8);
        break;
      }
      case DType::kI32: {
        const int32_t v = static_cast<int32_t>(rng() % 50000);
        std::memcpy(p, &v, 4);
        break;
      }
      case DType::kBool:
        *p = rng() & 1;
        break;
      default:
        *p = static_cast<uint8_t>(rng());
        break;
    }
  }
  for (size_t i = count * es; i < n; ++i) out[i] = static_cast<uint8_t>(rng());
  return out;
}

// A copy of f32 `weights` after one small Adam-like step: each element moves
// by about lr in a random direction, so most bf16 values round the same.
inline std::vector<uint8_t> StepF32(const std::vector<uint8_t>& weights,
                                    float lr, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out = weights;
  for (size_t i = 0; i + 4 <= out.size(); i += 4) {
    float f;
    std::memcpy(&f, out.data() + i, 4);
    f += (rng() & 1) ? lr : -lr;
    std::memcpy(out.data() + i, &f, 4);
  }
  return out;
}

inline std::vector<uint8_t> CastBuffer(const std::vector<uint8_t>& f32) {
  std::vector<uint8_t> out(f32.size() / 2);
  CastF32ToBf16(f32.data(), out.data(), f32.size() / 4);
  return out;
}

}  // namespace hy::statestore::testing

#endif  // HY_TESTS_STATESTORE_CODEC_TEST_UTIL_H_
