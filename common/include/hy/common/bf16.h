// bfloat16 <-> float32 conversion on plain buffers.
//
// bf16 keeps float32's sign and 8-bit exponent and the top 7 mantissa bits,
// so widening is exact and narrowing rounds. Narrowing here is IEEE
// round-to-nearest-even, the rounding PyTorch's `tensor.to(torch.bfloat16)`
// uses:
//   - ties go to the even bf16 mantissa;
//   - values at or beyond half an ulp above bf16's largest finite value
//     become +-Inf; +-Inf stay +-Inf; +-0 keep their sign;
//   - float32 denormals round like any other value (bf16 has the same
//     exponent range, so no flush to zero);
//   - every NaN stays a NaN (quiet, sign and top payload bits kept), even one
//     whose payload lives only in the 16 bits that are dropped.
//
// Values are handled as raw bit patterns (uint32_t for float32, uint16_t for
// bf16) in the host's byte order, so no floating-point mode affects them.
// Thread-safety: pure functions.

#ifndef HY_COMMON_BF16_H_
#define HY_COMMON_BF16_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hy {

inline uint16_t F32BitsToBf16Bits(uint32_t bits) {
  const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  return static_cast<uint16_t>((bits & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan
                                                                  : rounded);
}

inline uint32_t Bf16BitsToF32Bits(uint16_t bits) {
  return static_cast<uint32_t>(bits) << 16;
}

inline uint16_t FloatToBf16Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return F32BitsToBf16Bits(bits);
}

inline float Bf16BitsToFloat(uint16_t b) {
  const uint32_t bits = Bf16BitsToF32Bits(b);
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// out[i] = F32BitsToBf16Bits(in[i]) for i < n. `in` and `out` may be
// unaligned (they are read and written with memcpy-equivalent loads) and
// must not overlap.
void CastF32ToBf16(const uint8_t* in, uint8_t* out, size_t n);

// out[i] = Bf16BitsToF32Bits(in[i]) for i < n. Same aliasing rules.
void WidenBf16ToF32(const uint8_t* in, uint8_t* out, size_t n);

}  // namespace hy

#endif  // HY_COMMON_BF16_H_
