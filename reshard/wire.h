// Internal to the executor: the bytes of one bucket on the wire.
//
//   bucket := kind:u8 body
//   kFull       body = the wire-dtype elements, packed
//   kUnchanged  body = checksum:u64                 (xxh3-64 of the bucket)
//   kPairs      body = checksum:u64 count:u64 value[count] gaps
//                      (new values, and their element indices within the
//                      bucket as gaps of one byte or five: pairs.h)
//   kXorChunk   body = checksum:u64 chunk           (a codec chunk of the
//                      new bytes XOR-delta'd against the previous bucket)
//
// Delta kinds decode against the receiver's previous copy of the bucket and
// are checked against the checksum of the new bytes: a previous copy that is
// not what the sender last sent gives DataLoss.

#ifndef HY_RESHARD_WIRE_H_
#define HY_RESHARD_WIRE_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/dtype.h"
#include "hy/common/result.h"

namespace hy::reshard::internal {

// An allocator whose resize leaves new bytes uninitialised: buckets and
// scratch copies are overwritten whole, so zeroing them first (and
// faulting fresh pages in to do it) would be wasted work.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// The top bit of each es-byte lane of the 64-bit word d that is nonzero:
// a lane is nonzero iff its low bits carry into its top bit or that bit
// is set. REQUIRES: es is 1, 2, 4 or 8.
inline uint64_t NonzeroLaneBits(uint64_t d, size_t es) {
  static constexpr uint64_t kHigh[] = {0,
                                       0x8080808080808080ull,
                                       0x8000800080008000ull,
                                       0,
                                       0x8000000080000000ull,
                                       0,
                                       0,
                                       0,
                                       0x8000000000000000ull};
  const uint64_t high = kHigh[es];
  const uint64_t low = ~high;
  return (((d & low) + low) | d) & high;
}

// Calls fn(word index, XOR of the words) for every 64-bit word that
// differs between a and b (`words` words), four words at a time.
template <typename Fn>
void ForEachChangedWord(const uint8_t* a, const uint8_t* b, size_t words,
                        Fn fn) {
  size_t w = 0;
  for (; w + 4 <= words; w += 4) {
    uint64_t x[4], y[4];
    std::memcpy(x, a + w * 8, 32);
    std::memcpy(y, b + w * 8, 32);
    const uint64_t d0 = x[0] ^ y[0], d1 = x[1] ^ y[1], d2 = x[2] ^ y[2],
                   d3 = x[3] ^ y[3];
    if ((d0 | d1 | d2 | d3) == 0) continue;
    if (d0) fn(w, d0);
    if (d1) fn(w + 1, d1);
    if (d2) fn(w + 2, d2);
    if (d3) fn(w + 3, d3);
  }
  for (; w < words; ++w) {
    uint64_t x, y;
    std::memcpy(&x, a + w * 8, 8);
    std::memcpy(&y, b + w * 8, 8);
    if (x != y) fn(w, x ^ y);
  }
}

// The bytes of a bucket (kept across runs by the executor).
using WireBuffer = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;

enum class BucketKind : uint8_t {
  kFull = 0,
  kUnchanged = 1,
  kPairs = 2,
  kXorChunk = 3,
};

// What sending a bucket in each form costs in time: its bytes on the link,
// plus, for kXorChunk, the codec's work on both ends (XOR, byte grouping
// and zstd; the defaults are the speeds measured on this project's 2-core
// machines). kPairs costs only its bytes (finding the changes is paid
// whatever form wins; scattering them is memory speed).
struct DeltaCost {
  double link_bytes_per_second = 1.25e9;  // 10 Gb/s.
  double codec_encode_bytes_per_second = 450e6;
  double codec_decode_bytes_per_second = 1.0e9;
};

// Writes into *out the cheapest delta form (kUnchanged, kPairs or
// kXorChunk) of the bucket `now` against `before` under `cost`, or
// clears *out when the full form is cheapest; *out keeps its capacity for
// the next call. The codec runs only when even a chunk of no bytes could
// win. `dtype` is the elements' dtype when uniform (kU8 otherwise),
// `element_size` the unit compared for changes. *changed gets the number
// of changed elements. Returns Internal when the sizes do not fit.
// REQUIRES: before.size() == now.size().
Status EncodeDelta(DType dtype, size_t element_size, ConstBytes before,
                   ConstBytes now, WireBuffer* out, int64_t* changed,
                   const DeltaCost& cost = DeltaCost());

// Decodes a received bucket into `now`. `before` is the receiver's previous
// copy (needed for delta kinds; may be empty for kFull). Returns DataLoss
// for a malformed bucket or a checksum mismatch. *unchanged is set for
// kUnchanged (then `now` is not written: it equals `before`).
Status DecodeBucket(ConstBytes wire, DType dtype, size_t element_size,
                    ConstBytes before, MutableBytes now, bool* unchanged);

}  // namespace hy::reshard::internal

#endif  // HY_RESHARD_WIRE_H_
