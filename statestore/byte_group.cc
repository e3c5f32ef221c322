#include "byte_group.h"

#include <cstring>

#include "hy/common/bf16_lanes.h"

namespace hy::statestore::internal {

namespace {

#if defined(HY_BF16_LANES_X86)
// The merges of exponent-split planes, 32 elements a step in AVX2 registers
// (the load path's inner loop). Each returns how many elements it did (a
// multiple of 32); the portable loop does the rest. In bytes, an f32 is
// {p0, p1, (p2 & 0x7F) | exp << 7, (p2 & 0x80) | exp >> 1} and a bf16
// {(sm & 0x7F) | exp << 7, (sm & 0x80) | exp >> 1}.
__attribute__((target("avx2"))) inline void HighBytes(__m256i e, __m256i s,
                                                      __m256i* lo,
                                                      __m256i* hi) {
  const __m256i bit7 = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i low7 = _mm256_set1_epi8(0x7F);
  // 16-bit shifts; the masks drop the bits that cross into the next byte.
  *lo = _mm256_or_si256(_mm256_and_si256(s, low7),
                        _mm256_and_si256(_mm256_slli_epi16(e, 7), bit7));
  *hi = _mm256_or_si256(_mm256_and_si256(s, bit7),
                        _mm256_and_si256(_mm256_srli_epi16(e, 1), low7));
}

__attribute__((target("avx2"))) size_t MergeF32Avx2(const uint8_t* exp,
                                                    const uint8_t* p0,
                                                    const uint8_t* p1,
                                                    const uint8_t* p2, size_t n,
                                                    uint8_t* out) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i b2, b3;
    HighBytes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(exp + i)),
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p2 + i)), &b2,
              &b3);
    const __m256i b0 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0 + i));
    const __m256i b1 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1 + i));
    const __m256i t0 = _mm256_unpacklo_epi8(b0, b1);  // 0-7 | 16-23
    const __m256i t1 = _mm256_unpackhi_epi8(b0, b1);  // 8-15 | 24-31
    const __m256i t2 = _mm256_unpacklo_epi8(b2, b3);
    const __m256i t3 = _mm256_unpackhi_epi8(b2, b3);
    const __m256i d0 = _mm256_unpacklo_epi16(t0, t2);  // 0-3 | 16-19
    const __m256i d1 = _mm256_unpackhi_epi16(t0, t2);  // 4-7 | 20-23
    const __m256i d2 = _mm256_unpacklo_epi16(t1, t3);  // 8-11 | 24-27
    const __m256i d3 = _mm256_unpackhi_epi16(t1, t3);  // 12-15 | 28-31
    __m256i* o = reinterpret_cast<__m256i*>(out + 4 * i);
    _mm256_storeu_si256(o + 0, _mm256_permute2x128_si256(d0, d1, 0x20));
    _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(d2, d3, 0x20));
    _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(d0, d1, 0x31));
    _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(d2, d3, 0x31));
  }
  return i;
}

__attribute__((target("avx2"))) size_t MergeBf16Avx2(const uint8_t* exp,
                                                     const uint8_t* sm,
                                                     size_t n, uint8_t* out) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i lo, hi;
    HighBytes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(exp + i)),
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sm + i)), &lo,
              &hi);
    const __m256i a = _mm256_unpacklo_epi8(lo, hi);  // 0-7 | 16-23
    const __m256i b = _mm256_unpackhi_epi8(lo, hi);  // 8-15 | 24-31
    __m256i* o = reinterpret_cast<__m256i*>(out + 2 * i);
    _mm256_storeu_si256(o + 0, _mm256_permute2x128_si256(a, b, 0x20));
    _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(a, b, 0x31));
  }
  return i;
}

// The splits, the merges' inverses: 32 elements a step (the save path's
// inner loop; the compiler vectorizes the portable loops with SSE2 only).
// In-lane byte shuffles gather each byte of 4 elements into a dword; a
// dword permute then a 64-bit unpack and 128-bit permute gather planes.
__attribute__((target("avx2"))) inline void SplitHighBytes(__m256i lo,
                                                           __m256i hi,
                                                           __m256i* e,
                                                           __m256i* s) {
  const __m256i bit7 = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i low7 = _mm256_set1_epi8(0x7F);
  *e = _mm256_or_si256(
      _mm256_and_si256(_mm256_slli_epi16(hi, 1),
                       _mm256_set1_epi8(static_cast<char>(0xFE))),
      _mm256_and_si256(_mm256_srli_epi16(lo, 7), _mm256_set1_epi8(1)));
  *s = _mm256_or_si256(_mm256_and_si256(hi, bit7), _mm256_and_si256(lo, low7));
}

__attribute__((target("avx2"))) size_t SplitF32Avx2(const uint8_t* in, size_t n,
                                                    uint8_t* exp, uint8_t* p0,
                                                    uint8_t* p1, uint8_t* p2) {
  // Per lane: bytes 0 of its 4 elements, then bytes 1, 2, 3.
  const __m256i by_byte =
      _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,  //
                       0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m256i pairs = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i* src = reinterpret_cast<const __m256i*>(in + 4 * i);
    __m256i q[4];  // q[k]: qwords {b0, b1, b2, b3} of elements 8k..8k+7.
    for (int k = 0; k < 4; ++k) {
      q[k] = _mm256_permutevar8x32_epi32(
          _mm256_shuffle_epi8(_mm256_loadu_si256(src + k), by_byte), pairs);
    }
    const __m256i lo01 = _mm256_unpacklo_epi64(q[0], q[1]);  // b0 | b2
    const __m256i hi01 = _mm256_unpackhi_epi64(q[0], q[1]);  // b1 | b3
    const __m256i lo23 = _mm256_unpacklo_epi64(q[2], q[3]);
    const __m256i hi23 = _mm256_unpackhi_epi64(q[2], q[3]);
    const __m256i b0 = _mm256_permute2x128_si256(lo01, lo23, 0x20);
    const __m256i b1 = _mm256_permute2x128_si256(hi01, hi23, 0x20);
    const __m256i b2 = _mm256_permute2x128_si256(lo01, lo23, 0x31);
    const __m256i b3 = _mm256_permute2x128_si256(hi01, hi23, 0x31);
    __m256i e, s;
    SplitHighBytes(b2, b3, &e, &s);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(exp + i), e);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p0 + i), b0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p1 + i), b1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p2 + i), s);
  }
  return i;
}

__attribute__((target("avx2"))) size_t SplitBf16Avx2(const uint8_t* in,
                                                     size_t n, uint8_t* exp,
                                                     uint8_t* sm) {
  // Per lane: the low bytes of its 8 elements, then the high bytes.
  const __m256i by_byte =
      _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,  //
                       0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i* src = reinterpret_cast<const __m256i*>(in + 2 * i);
    // {lo 0-7, lo 8-15, hi 0-7, hi 8-15} of 16 elements.
    const __m256i a = _mm256_permute4x64_epi64(
        _mm256_shuffle_epi8(_mm256_loadu_si256(src), by_byte), 0xD8);
    const __m256i b = _mm256_permute4x64_epi64(
        _mm256_shuffle_epi8(_mm256_loadu_si256(src + 1), by_byte), 0xD8);
    __m256i e, s;
    SplitHighBytes(_mm256_permute2x128_si256(a, b, 0x20),
                   _mm256_permute2x128_si256(a, b, 0x31), &e, &s);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(exp + i), e);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sm + i), s);
  }
  return i;
}
#endif

// Fixed-width loops with restrict pointers: GCC and clang vectorize these at
// -O3 (tens of GB/s on one core, far above zstd's speed).
template <int K>
void GroupFixed(const uint8_t* __restrict in, size_t n,
                uint8_t* __restrict out) {
  for (size_t i = 0; i < n; ++i) {
    for (int j = 0; j < K; ++j) out[j * n + i] = in[i * K + j];
  }
}

template <int K>
void UngroupFixed(const uint8_t* const* planes, size_t n,
                  uint8_t* __restrict out) {
  if constexpr (K == 2) {
    const uint8_t* __restrict a = planes[0];
    const uint8_t* __restrict b = planes[1];
    for (size_t i = 0; i < n; ++i) {
      out[2 * i] = a[i];
      out[2 * i + 1] = b[i];
    }
  } else if constexpr (K == 4) {
    const uint8_t* __restrict a = planes[0];
    const uint8_t* __restrict b = planes[1];
    const uint8_t* __restrict c = planes[2];
    const uint8_t* __restrict d = planes[3];
    for (size_t i = 0; i < n; ++i) {
      out[4 * i] = a[i];
      out[4 * i + 1] = b[i];
      out[4 * i + 2] = c[i];
      out[4 * i + 3] = d[i];
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      for (int j = 0; j < K; ++j) out[i * K + j] = planes[j][i];
    }
  }
}

inline uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

void GroupBytes(const uint8_t* in, size_t n, size_t elem_size, uint8_t* out) {
  switch (elem_size) {
    case 1:
      CopyBytes(out, in, n);
      return;
    case 2:
      GroupFixed<2>(in, n, out);
      return;
    case 4:
      GroupFixed<4>(in, n, out);
      return;
    case 8:
      GroupFixed<8>(in, n, out);
      return;
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < elem_size; ++j)
      out[j * n + i] = in[i * elem_size + j];
  }
}

void UngroupPlanes(const uint8_t* const* planes, size_t n, size_t elem_size,
                   uint8_t* out) {
  switch (elem_size) {
    case 1:
      CopyBytes(out, planes[0], n);
      return;
    case 2:
      UngroupFixed<2>(planes, n, out);
      return;
    case 4:
      UngroupFixed<4>(planes, n, out);
      return;
    case 8:
      UngroupFixed<8>(planes, n, out);
      return;
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < elem_size; ++j) {
      out[i * elem_size + j] = planes[j][i];
    }
  }
}

void UngroupBytes(const uint8_t* in, size_t n, size_t elem_size, uint8_t* out) {
  const uint8_t* planes[kMaxPlanes];
  for (size_t j = 0; j < elem_size && j < kMaxPlanes; ++j) {
    planes[j] = in + j * n;
  }
  if (elem_size <= kMaxPlanes) return UngroupPlanes(planes, n, elem_size, out);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < elem_size; ++j)
      out[i * elem_size + j] = in[j * n + i];
  }
}

// bf16 = s eeeeeeee mmmmmmm. Plane 0: exponent; plane 1: s mmmmmmm.
void SplitExponentBf16(const uint8_t* __restrict in, size_t n,
                       uint8_t* __restrict out) {
  uint8_t* __restrict exp = out;
  uint8_t* __restrict sm = out + n;
  size_t i = 0;
#if defined(HY_BF16_LANES_X86)
  if (HasAvx2()) i = SplitBf16Avx2(in, n, exp, sm);
#endif
  for (; i < n; ++i) {
    const uint16_t v = Load16(in + 2 * i);
    exp[i] = static_cast<uint8_t>(v >> 7);
    sm[i] = static_cast<uint8_t>(((v >> 8) & 0x80) | (v & 0x7F));
  }
}

void MergeExponentBf16(const uint8_t* in, size_t n, uint8_t* out) {
  MergeExponentBf16Planes(in, in + n, n, out);
}

void MergeExponentBf16Planes(const uint8_t* __restrict exp,
                             const uint8_t* __restrict sm, size_t n,
                             uint8_t* __restrict out) {
  size_t done = 0;
#if defined(HY_BF16_LANES_X86)
  if (HasAvx2()) done = MergeBf16Avx2(exp, sm, n, out);
#endif
  exp += done;
  sm += done;
  out += 2 * done;
  n -= done;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t v = static_cast<uint16_t>(
        ((sm[i] & 0x80u) << 8) | (static_cast<uint16_t>(exp[i]) << 7) |
        (sm[i] & 0x7Fu));
    std::memcpy(out + 2 * i, &v, 2);
  }
}

// f32 = s e8 m23. Plane 0: exponent; planes 1..3: the 24-bit value
// (s << 23 | m) in little-endian byte order.
void SplitExponentF32(const uint8_t* __restrict in, size_t n,
                      uint8_t* __restrict out) {
  uint8_t* __restrict exp = out;
  uint8_t* __restrict p0 = out + n;
  uint8_t* __restrict p1 = out + 2 * n;
  uint8_t* __restrict p2 = out + 3 * n;
  size_t i = 0;
#if defined(HY_BF16_LANES_X86)
  if (HasAvx2()) i = SplitF32Avx2(in, n, exp, p0, p1, p2);
#endif
  for (; i < n; ++i) {
    const uint32_t v = Load32(in + 4 * i);
    exp[i] = static_cast<uint8_t>(v >> 23);
    p0[i] = static_cast<uint8_t>(v);
    p1[i] = static_cast<uint8_t>(v >> 8);
    p2[i] = static_cast<uint8_t>(((v >> 24) & 0x80) | ((v >> 16) & 0x7F));
  }
}

void MergeExponentF32(const uint8_t* in, size_t n, uint8_t* out) {
  MergeExponentF32Planes(in, in + n, in + 2 * n, in + 3 * n, n, out);
}

void MergeExponentF32Planes(const uint8_t* __restrict exp,
                            const uint8_t* __restrict p0,
                            const uint8_t* __restrict p1,
                            const uint8_t* __restrict p2, size_t n,
                            uint8_t* __restrict out) {
  size_t done = 0;
#if defined(HY_BF16_LANES_X86)
  if (HasAvx2()) done = MergeF32Avx2(exp, p0, p1, p2, n, out);
#endif
  exp += done;
  p0 += done;
  p1 += done;
  p2 += done;
  out += 4 * done;
  n -= done;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t v =
        ((p2[i] & 0x80u) << 24) | (static_cast<uint32_t>(exp[i]) << 23) |
        ((p2[i] & 0x7Fu) << 16) | (static_cast<uint32_t>(p1[i]) << 8) | p0[i];
    std::memcpy(out + 4 * i, &v, 4);
  }
}

void XorBytes(const uint8_t* a, const uint8_t* b, size_t n, uint8_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    x ^= y;
    std::memcpy(out + i, &x, 8);
  }
  for (; i < n; ++i) out[i] = a[i] ^ b[i];
}

}  // namespace hy::statestore::internal
