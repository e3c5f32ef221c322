// Internal: writing the chunk header whose layout codec.h documents.

#ifndef HY_STATESTORE_CHUNK_HEADER_H_
#define HY_STATESTORE_CHUNK_HEADER_H_

#include <cstdint>

#include "hy/statestore/codec.h"

namespace hy::statestore {

// Length of the stored bytes for a chunk of raw_length bytes.
uint64_t StoredLengthFor(bool bf16_cast, uint64_t raw_length);

// Writes `h` (its version, flags, lengths, checksums) and the header checksum
// into out[0, kChunkHeaderSize). h.base_hash is written only when h.xor_delta.
void SerializeChunkHeader(const ChunkHeader& h, uint8_t out[kChunkHeaderSize]);

}  // namespace hy::statestore

#endif  // HY_STATESTORE_CHUNK_HEADER_H_
