#include "hy/common/bf16.h"

#include "hy/common/bf16_lanes.h"

namespace hy {
namespace {

// The portable loops: blocks of a fixed size go through aligned local
// arrays so that the compiler vectorizes them whatever the alignment of the
// caller's buffers.
constexpr size_t kBlock = 256;

void CastPortable(const uint8_t* in, uint8_t* out, size_t n) {
  alignas(64) uint32_t src[kBlock];
  alignas(64) uint16_t dst[kBlock];
  for (size_t done = 0; done < n;) {
    const size_t m = n - done < kBlock ? n - done : kBlock;
    std::memcpy(src, in + done * 4, m * 4);
    for (size_t i = 0; i < m; ++i) dst[i] = F32BitsToBf16Bits(src[i]);
    std::memcpy(out + done * 2, dst, m * 2);
    done += m;
  }
}

void WidenPortable(const uint8_t* in, uint8_t* out, size_t n) {
  alignas(64) uint16_t src[kBlock];
  alignas(64) uint32_t dst[kBlock];
  for (size_t done = 0; done < n;) {
    const size_t m = n - done < kBlock ? n - done : kBlock;
    std::memcpy(src, in + done * 2, m * 2);
    for (size_t i = 0; i < m; ++i) dst[i] = Bf16BitsToF32Bits(src[i]);
    std::memcpy(out + done * 4, dst, m * 4);
    done += m;
  }
}

#if defined(HY_BF16_LANES_X86)
// Sixteen elements a step in registers; returns how many it did (a
// multiple of 16), the rest is the portable loop's.
__attribute__((target("avx2"))) size_t CastAvx2(const uint8_t* in, uint8_t* out,
                                                size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i * 2),
                        Narrow16(in + i * 4));
  }
  return i;
}

__attribute__((target("avx2"))) size_t WidenAvx2(const uint8_t* in,
                                                 uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = _mm256_slli_epi32(
        _mm256_cvtepu16_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i * 2))),
        16);
    const __m256i hi = _mm256_slli_epi32(
        _mm256_cvtepu16_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i * 2 + 16))),
        16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i * 4), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i * 4 + 32), hi);
  }
  return i;
}
#endif

}  // namespace

void CastF32ToBf16(const uint8_t* in, uint8_t* out, size_t n) {
  size_t done = 0;
#if defined(HY_BF16_LANES_X86)
  if (HasAvx2()) done = CastAvx2(in, out, n);
#endif
  CastPortable(in + done * 4, out + done * 2, n - done);
}

void WidenBf16ToF32(const uint8_t* in, uint8_t* out, size_t n) {
  size_t done = 0;
#if defined(HY_BF16_LANES_X86)
  if (HasAvx2()) done = WidenAvx2(in, out, n);
#endif
  WidenPortable(in + done * 2, out + done * 4, n - done);
}

}  // namespace hy
