// Internal: writing the chunk header whose layout codec.h documents.

#ifndef HY_STATESTORE_CHUNK_HEADER_H_
#define HY_STATESTORE_CHUNK_HEADER_H_

#include <cstdint>

#include "hy/statestore/codec.h"

namespace hy::statestore {

// Length of the stored bytes for a chunk of raw_length bytes.
uint64_t StoredLengthFor(bool bf16_cast, uint64_t raw_length);

// Writes `h` (its version, flags, lengths, checksums) and the header checksum
// into out[0, h.header_length): version 1 or 2, as h.version says.
// h.base_hash is written only when h.xor_delta.
// REQUIRES: h.header_length is kChunkHeaderSize for version 1 and
// ChunkHeaderSizeV2(h.group_count) for version 2.
void SerializeChunkHeader(const ChunkHeader& h, uint8_t* out);

// Version 2: the seed of byte group g's checksum. It is Checksum64 of the
// header's first 64 bytes (everything but the group table) mixed with g,
// so a group's checksum also vouches for how the header says to decode
// it: a header rewritten with another transform, dtype, address or group
// order and a fresh header checksum still fails.
uint64_t GroupChecksumSeed(const uint8_t* header, int g);

// Version 2: the number of byte groups for a chunk of this transform and
// stored dtype (one per byte of an element; one for no transform).
int GroupCount(ByteTransform t, DType stored);

}  // namespace hy::statestore

#endif  // HY_STATESTORE_CHUNK_HEADER_H_
