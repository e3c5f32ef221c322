// Byte-plane transforms that make float tensors compressible (internal to the
// codec). Each is a bijection on n whole elements; the caller handles a
// trailing partial element.
//
//   Byte grouping (Blosc "shuffle"): element i's byte j goes to
//   out[j * n + i], so the exponent-heavy high bytes of all elements sit
//   together and the noisy low mantissa bytes sit together.
//
//   Exponent split (bf16 and f32 only): plane 0 holds the 8-bit exponent of
//   every element; the remaining planes hold sign and mantissa, with the sign
//   as the top bit of the last plane. Unlike byte grouping this puts the
//   whole exponent in one plane (byte grouping straddles it across two).
//
// All functions: `in` and `out` must not overlap; alignment is not required.

#ifndef HY_STATESTORE_BYTE_GROUP_H_
#define HY_STATESTORE_BYTE_GROUP_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hy::statestore::internal {

// memcpy that accepts null pointers when n == 0 (plain memcpy does not).
inline void CopyBytes(void* dst, const void* src, size_t n) {
  if (n != 0) std::memcpy(dst, src, n);
}

// Planes of more elements than this are grouped, but not by UngroupPlanes.
inline constexpr size_t kMaxPlanes = 8;

void GroupBytes(const uint8_t* in, size_t n, size_t elem_size, uint8_t* out);
void UngroupBytes(const uint8_t* in, size_t n, size_t elem_size, uint8_t* out);
// UngroupBytes with plane j at planes[j] (n bytes each) rather than at
// in + j * n: how a version 2 chunk holds them. REQUIRES: elem_size <=
// kMaxPlanes.
void UngroupPlanes(const uint8_t* const* planes, size_t n, size_t elem_size,
                   uint8_t* out);

void SplitExponentBf16(const uint8_t* in, size_t n, uint8_t* out);
void MergeExponentBf16(const uint8_t* in, size_t n, uint8_t* out);
void MergeExponentBf16Planes(const uint8_t* exp, const uint8_t* sm, size_t n,
                             uint8_t* out);

void SplitExponentF32(const uint8_t* in, size_t n, uint8_t* out);
void MergeExponentF32(const uint8_t* in, size_t n, uint8_t* out);
void MergeExponentF32Planes(const uint8_t* exp, const uint8_t* p0,
                            const uint8_t* p1, const uint8_t* p2, size_t n,
                            uint8_t* out);

// out[i] = a[i] ^ b[i] for i < n; `out` may alias `a`.
void XorBytes(const uint8_t* a, const uint8_t* b, size_t n, uint8_t* out);

}  // namespace hy::statestore::internal

#endif  // HY_STATESTORE_BYTE_GROUP_H_
