// Internal to the executor: sparse delta without gathering buckets.
//
// The sender keeps, per bucket, the wire bytes it last sent (`last`, in
// bucket order: the executor's full bucket itself). Encoding casts the
// source elements to the wire dtype block by block straight over `last`,
// recording the elements that changed as it goes, so `last` is the new
// full bucket afterwards whatever form is sent, and nothing else is
// copied. The receiver applies the changes straight into its destination
// shards, hashing each block right after its changes. The forms and checksums
// are wire.h's kUnchanged and kPairs: the checksum is xxh3-64 of the new bucket
// bytes, hashed block by block.
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
  kUnsupported,  // Mixed wire dtypes, more elements than u32 indices, or
                 // `last` not of the bucket's size.
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
// dtype) against `last` (the bucket's wire bytes as last sent) into
// *bucket, and writes the new wire bytes over `last`. Returns kTooDense,
// with `last` so written and *bucket untouched or cleared, when the pairs
// form would not beat the full one (the caller sends `last` whole); recording
// stops early once that is clear. *changed gets the changed elements found (all
// of them when kEncoded, those seen before stopping otherwise).
// kUnsupported leaves everything untouched.
SparseOutcome EncodeSparse(const ModelSpec& spec, WireFormat wire,
                           const PeerList& list,
                           const std::vector<ConstBytes>& src,
                           MutableBytes last, SparseScratch* scratch,
                           WireBuffer* bucket, int64_t* changed);

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
