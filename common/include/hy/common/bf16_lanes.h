// F32BitsToBf16Bits on SIMD lanes, for the loops that cast at memory speed
// (hy::CastF32ToBf16, reshard's sparse delta). Each function gives exactly
// F32BitsToBf16Bits per lane (round-to-nearest-even; NaNs stay quiet NaNs).
//
// The AVX2 functions carry __attribute__((target("avx2"))): call them only
// from functions with the same attribute, after HasAvx2() said yes. The
// SSE2 ones need nothing beyond x86-64's baseline. Elsewhere this header
// declares only HasAvx2(), which is then false.
//
// Thread-safety: pure functions.

#ifndef HY_COMMON_BF16_LANES_H_
#define HY_COMMON_BF16_LANES_H_

#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#define HY_BF16_LANES_X86 1
#include <immintrin.h>
#endif

namespace hy {

#if defined(HY_BF16_LANES_X86)

inline bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// Four lanes, each sign-extended to 32 bits (so that _mm_packs_epi32 keeps
// its 16 bits exactly).
inline __m128i NarrowLanes4(__m128i x) {
  const __m128i lsb = _mm_and_si128(_mm_srli_epi32(x, 16), _mm_set1_epi32(1));
  const __m128i rounded = _mm_srai_epi32(
      _mm_add_epi32(_mm_add_epi32(x, _mm_set1_epi32(0x7FFF)), lsb), 16);
  const __m128i nan = _mm_cmpgt_epi32(
      _mm_and_si128(x, _mm_set1_epi32(0x7FFFFFFF)), _mm_set1_epi32(0x7F800000));
  const __m128i quiet =
      _mm_or_si128(_mm_srai_epi32(x, 16), _mm_set1_epi32(0x40));
  return _mm_or_si128(_mm_and_si128(nan, quiet),
                      _mm_andnot_si128(nan, rounded));
}

// Eight f32 at `in` (any alignment) as eight bf16.
inline __m128i Narrow8(const uint8_t* in) {
  return _mm_packs_epi32(
      NarrowLanes4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))),
      NarrowLanes4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16))));
}

// NarrowLanes4 on eight lanes.
__attribute__((target("avx2"))) inline __m256i NarrowLanes8(__m256i x) {
  const __m256i lsb =
      _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srai_epi32(
      _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb),
      16);
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)),
                         _mm256_set1_epi32(0x7F800000));
  const __m256i quiet =
      _mm256_or_si256(_mm256_srai_epi32(x, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

// Sixteen f32 at `in` (any alignment) as sixteen bf16, in order.
__attribute__((target("avx2"))) inline __m256i Narrow16(const uint8_t* in) {
  const __m256i lo =
      NarrowLanes8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)));
  const __m256i hi = NarrowLanes8(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 32)));
  // packs works within 128-bit halves: put the quarters back in order.
  return _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);
}

#else

inline bool HasAvx2() { return false; }

#endif

}  // namespace hy

#endif  // HY_COMMON_BF16_LANES_H_
