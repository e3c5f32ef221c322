#include "hy/common/bf16.h"

namespace hy {

// Blocks of a fixed size go through aligned local arrays so that the compiler
// vectorizes the conversion whatever the alignment of the caller's buffers.
namespace {
constexpr size_t kBlock = 256;
}  // namespace

void CastF32ToBf16(const uint8_t* in, uint8_t* out, size_t n) {
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

void WidenBf16ToF32(const uint8_t* in, uint8_t* out, size_t n) {
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

}  // namespace hy
