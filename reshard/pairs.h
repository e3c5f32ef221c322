// Internal to the executor: the layout of a kPairs bucket (wire.h), the
// changed elements of a bucket and their new values.
//
//   kPairs body = checksum:u64 count:u64 value[count] gaps
//   gaps        = for each change k, g = index[k] - index[k-1] (with
//                 index[-1] = -1, so every g >= 1): one byte g when
//                 g < 256, else a zero byte and g as a u32
//
// At a few percent changed a change costs its value and about one byte,
// where u32 indices cost four: 5% of a bf16 bucket goes in 3.5 MB per
// 47 MB, not 7.
//
// Thread-safety: pure functions over caller-owned buffers; GapReader is a
// cursor for one thread.

#ifndef HY_RESHARD_PAIRS_H_
#define HY_RESHARD_PAIRS_H_

#include <cstdint>
#include <cstring>

#include "hy/common/bytes.h"
#include "hy/common/status.h"
#include "wire.h"

namespace hy::reshard::internal {

// Kind, checksum and count.
constexpr size_t kPairsHeader = 1 + 8 + 8;

// The bytes the gaps of the strictly increasing positions index[0..count)
// take.
size_t GapBytes(const uint32_t* index, size_t count);

// Lays out a kPairs bucket in *out for `count` changes of es-byte values at
// the strictly increasing positions index[0..count): writes the kind,
// checksum, count and gaps, and returns where the caller writes the values
// (count * es bytes). *out keeps its capacity across calls.
// REQUIRES: each index < 2^32 - 1.
uint8_t* StartPairs(uint64_t checksum, const uint32_t* index, size_t count,
                    size_t es, WireBuffer* out);

// Reads the positions of a gaps stream in order.
class GapReader {
 public:
  GapReader() = default;
  GapReader(const uint8_t* begin, const uint8_t* end) : p_(begin), end_(end) {}

  // Sets *index to the next position. Returns false at the stream's end or
  // where it is malformed (a truncated or zero escaped gap).
  bool Next(uint64_t* index) {
    if (p_ == end_) return false;
    uint64_t gap = *p_++;
    if (gap == 0) {
      uint32_t wide;
      if (end_ - p_ < 4) return false;
      std::memcpy(&wide, p_, 4);
      p_ += 4;
      if (wide < 256) return false;  // Never written so.
      gap = wide;
    }
    at_ += gap;
    *index = at_;
    return true;
  }
  // Whether every byte has been read.
  bool AtEnd() const { return p_ == end_; }

 private:
  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  uint64_t at_ = ~uint64_t{0};  // index[-1] = -1.
};

// A kPairs bucket, parsed.
struct PairsView {
  uint64_t checksum = 0;
  uint64_t count = 0;
  const uint8_t* values = nullptr;  // count * es bytes.
  GapReader gaps;
};

// Parses a kPairs bucket of es-byte values for a bucket of `elements`
// elements into *view. Returns DataLoss when the header does not fit: too
// short, more changes than elements, or gaps that cannot be `count` gaps.
// The positions themselves are checked by the reader (order, malformed
// gaps) and the caller (each < elements, and AtEnd after the last).
Status ParsePairs(ConstBytes bucket, size_t es, uint64_t elements,
                  PairsView* view);

}  // namespace hy::reshard::internal

#endif  // HY_RESHARD_PAIRS_H_
