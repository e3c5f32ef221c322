// Internal to the executor: sparse delta without gathering buckets.
//
// The sender compares each transfer's source elements, cast to the wire
// dtype block by block in a small buffer, with its own copy of what it last
// sent (`last`: wire-dtype copies of its source shards, indexed by tensor,
// at src_offset) and writes only the changes; the receiver applies them
// straight into its destination shards. Neither side copies a whole bucket.
// The forms and checksums are wire.h's kUnchanged and kPairs: the checksum
// is xxh3-64 of the new bucket bytes, hashed piece by piece.
//
// Only buckets whose elements share one wire dtype go this way; mixed ones
// (and a link slow enough for the codec's XOR form to pay) use wire.h's
// EncodeDelta over a gathered bucket.
//
// Thread-safety: pure functions over caller-owned buffers; calls on
// distinct outputs may run concurrently.

#ifndef HY_RESHARD_SPARSE_DELTA_H_
#define HY_RESHARD_SPARSE_DELTA_H_

#include <cstdint>
#include <vector>

#include "executor_internal.h"
#include "wire.h"

namespace hy::reshard::internal {

enum class SparseOutcome {
  kEncoded,      // *bucket holds a kUnchanged or kPairs bucket.
  kTooDense,     // Pairs would not be smaller than the full form.
  kUnsupported,  // Mixed wire dtypes, or more elements than u32 indices.
};

// Scratch space one encoder keeps across calls (its capacity is reused).
// Changes are written at [count] with room for a block past any stop, so
// recording one is two stores.
struct SparseScratch {
  std::vector<uint32_t, DefaultInitAllocator<uint32_t>> index;
  WireBuffer values;
  size_t count = 0;
};

// Encodes the bucket of `list` from `src` (source shards in their own
// dtype) against `last` into *bucket. Stops early with kTooDense when the
// changes seen so far put the pairs form well past the full one (the
// caller then sends the full form); *changed gets the changed elements
// found (all of them when kEncoded, those seen before stopping otherwise).
SparseOutcome EncodeSparse(const ModelSpec& spec, WireFormat wire,
                           const PeerList& list,
                           const std::vector<ConstBytes>& src,
                           const std::vector<ConstBytes>& last,
                           SparseScratch* scratch, WireBuffer* bucket,
                           int64_t* changed);

// Writes the new values a kPairs bucket from EncodeSparse carried into
// `last` at their source positions (a kUnchanged bucket writes nothing).
// REQUIRES: `bucket` came from EncodeSparse for `list`.
void ApplySentPairs(const PeerList& list, ConstBytes bucket,
                    const std::vector<MutableBytes>& last);

// Receiver: applies a kUnchanged or kPairs bucket for `list` straight into
// `dst` (at dst_offset) and checks the checksum over the result. Returns
// DataLoss for a malformed bucket or a checksum mismatch (the receiver's
// previous copy is not what the sender last sent); `dst` may then be
// partly written. REQUIRES: every transfer of `list` has one wire dtype.
Status ApplySparse(const PeerList& list, ConstBytes bucket,
                   const std::vector<MutableBytes>& dst);

// Whether `list` can go the sparse way (one wire dtype throughout).
bool SparseEligible(const ModelSpec& spec, WireFormat wire,
                    const PeerList& list);

}  // namespace hy::reshard::internal

#endif  // HY_RESHARD_SPARSE_DELTA_H_
