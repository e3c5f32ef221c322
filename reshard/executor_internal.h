// Internal to the executor: gathering runs into buckets and scattering them
// back, with the wire cast.

#ifndef HY_RESHARD_EXECUTOR_INTERNAL_H_
#define HY_RESHARD_EXECUTOR_INTERNAL_H_

#include <cstdint>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/reshard/executor.h"

namespace hy::reshard::internal {

// The transfers one rank exchanges with one peer in one step, in plan
// order, and their size on the wire.
struct PeerList {
  std::vector<Transfer> transfers;
  int64_t wire_bytes = 0;
  DType dtype = DType::kU8;  // The wire dtype if uniform, else kU8.
  size_t element_size = 1;   // Its size (1 when mixed).
};

// Describes `transfers` (sets wire_bytes, dtype, element_size).
void Describe(const ModelSpec& spec, WireFormat wire, PeerList* list);

// Whether a and b, both non-empty, take the same source elements in the
// same order: the same bucket goes to both.
bool SameSource(const PeerList& a, const PeerList& b);

// Writes the elements of list.transfers, read from `src` (source shards in
// their own dtype, at src_offset) and cast to the wire dtype, one after
// another at `out`.
void GatherSource(const ModelSpec& spec, WireFormat wire, const PeerList& list,
                  const std::vector<ConstBytes>& src, uint8_t* out);

// Like GatherSource from buffers already in the wire dtype, at src_offset
// (use_dst_offset false) or dst_offset (true).
void GatherWire(const ModelSpec& spec, WireFormat wire, const PeerList& list,
                const std::vector<ConstBytes>& bufs, bool use_dst_offset,
                uint8_t* out);

// The inverse: writes consecutive wire-dtype elements at `in` to the
// destination shards at dst_offset.
void Scatter(const ModelSpec& spec, WireFormat wire, const PeerList& list,
             const uint8_t* in, const std::vector<MutableBytes>& dst);

// Copies one transfer from a source shard to a destination shard, casting.
void CopyLocal(const ModelSpec& spec, WireFormat wire, const Transfer& t,
               const std::vector<ConstBytes>& src,
               const std::vector<MutableBytes>& dst);

}  // namespace hy::reshard::internal

#endif  // HY_RESHARD_EXECUTOR_INTERNAL_H_
