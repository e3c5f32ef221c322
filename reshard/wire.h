// Internal to the executor: the bytes of one bucket on the wire.
//
//   bucket := kind:u8 body
//   kFull       body = the wire-dtype elements, packed
//   kUnchanged  body = checksum:u64                 (xxh3-64 of the bucket)
//   kPairs      body = checksum:u64 count:u64 index:u32[count] value[count]
//                      (element indices within the bucket, new values)
//   kXorChunk   body = checksum:u64 chunk           (a codec chunk of the
//                      new bytes XOR-delta'd against the previous bucket)
//
// Delta kinds decode against the receiver's previous copy of the bucket and
// are checked against the checksum of the new bytes: a previous copy that is
// not what the sender last sent gives DataLoss.

#ifndef HY_RESHARD_WIRE_H_
#define HY_RESHARD_WIRE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/dtype.h"
#include "hy/common/result.h"

namespace hy::reshard::internal {

enum class BucketKind : uint8_t {
  kFull = 0,
  kUnchanged = 1,
  kPairs = 2,
  kXorChunk = 3,
};

// Replaces (*bucket)[1..] = `now` XOR-encoded against `before` and sets
// (*bucket)[0]; on entry *bucket holds the kind byte then `now` (the full
// form), which is kept when no delta form is smaller. `dtype` is the
// elements' dtype when uniform (kU8 otherwise), `element_size` the unit
// compared for changes. *changed gets the number of changed elements.
// REQUIRES: before.size() == bucket->size() - 1.
Status EncodeDelta(DType dtype, size_t element_size, ConstBytes before,
                   std::vector<uint8_t>* bucket, int64_t* changed);

// Decodes a received bucket into `now`. `before` is the receiver's previous
// copy (needed for delta kinds; may be empty for kFull). Returns DataLoss
// for a malformed bucket or a checksum mismatch. *unchanged is set for
// kUnchanged (then `now` is not written: it equals `before`).
Status DecodeBucket(ConstBytes wire, DType dtype, size_t element_size,
                    ConstBytes before, MutableBytes now, bool* unchanged);

}  // namespace hy::reshard::internal

#endif  // HY_RESHARD_WIRE_H_
