// The chunk codec: turns the raw bytes of one chunk of a tensor into a
// self-describing encoded chunk, and back.
//
// Encoding runs these stages, each optional and recorded in the header:
//   1. bf16 cast (lossy; only when EncodeOptions::cast_to_bf16 and the dtype
//      is f32): round-to-nearest-even, see hy/common/bf16.h.
//   2. XOR delta against a base chunk of the same raw length (the previous
//      version of the same region). Lossless. The header carries the base's
//      ContentHash, so a decoder refuses the wrong base.
//   3. Byte transform: byte grouping, or exponent split for f32/bf16.
//   4. zstd at EncodeOptions::zstd_level (default 1); entropy coding only
//      for exponent-split floats (EncodeOptions::float_entropy_only).
// When stages 2-4 do not shrink the data by at least
// EncodeOptions::min_compression_ratio, the chunk stores the (cast) bytes
// plainly instead: no delta, no transform, no zstd, so it decodes at memcpy
// speed and depends on no base.
//
// The "stored bytes" of a chunk are the raw bytes after stage 1 (equal to the
// raw bytes when there is no cast). Decode returns data in the raw dtype: a
// bf16-cast f32 chunk comes back as f32 (the bf16 values widened exactly).
//
// A length that is not a multiple of the element size is allowed: the
// trailing partial element is carried verbatim (not cast, not transformed).
//
// Two formats; EncodeChunk writes version 2, DecodeChunk reads both.
//
// Version 2 (the load path's format). The transformed stored bytes are cut
// into byte groups: one per byte plane (the exponent plane and the mantissa
// planes of a split float; each byte position of a grouped one; one group
// for no transform), the last group also holding a trailing partial
// element. Each group is stored raw or as its own zstd frame, whichever
// EncodeOptions::min_compression_ratio favours for that group: exponent
// planes compress, the mantissa planes of trained weights do not and are
// kept raw, so a decoder interleaves them straight from the stored bytes
// into the destination. A group of 1 MiB or more, other than an exponent
// plane or a delta's, is first tried on 64 KiB from four places, the last
// at its end: zstd reads the whole group only if that sample pays. Each
// group carries xxh3-64 of its stored bytes,
// which the decoder computes block by block in the same pass that merges
// the block into the destination: every stored byte is read from memory
// once and checked, and the decoded bytes are not hashed again. The header
// also names the chunk's content address (the store's key), so a store
// that finds a chunk under the wrong key knows.
//   0  u32  magic "HYCK"           16 u64  raw_length (bytes)
//   4  u8   format version (2)     24 u64  body_length (sum of groups)
//   5  u8   flags                  32 u8[16] address (ContentHash the store
//   6  u8   transform                        keys it by; zero if none)
//   7  u8   dtype (raw)            48 u8[16] base ContentHash, zero
//   8  u8   stored dtype                     without delta
//   9  i8   zstd level             64 G x {u64 length | codec << 56,
//  10  u8   G, groups (1..8)                u64 xxh3-64 of its bytes}
//  11  u8[5] reserved, zero        64+16G u64 xxh3-64 of header [0, 64+16G)
// then the groups' bytes in order. codec: 0 raw, 1 zstd frame.
// flags: bit 0 bf16 cast, bit 1 XOR delta, bit 2 some group is zstd.
//
// Version 1 (read and, for tests and migration, written): one zstd frame
// over all transformed bytes or none, 72-byte header:
//   0  u32  magic "HYCK"          24 u64  body_length (bytes)
//   4  u8   format version (1)    32 u64  xxh3-64 of the stored bytes
//   5  u8   flags                 40 u64  xxh3-64 of the body
//   6  u8   transform             48 u8[16] base ContentHash (canonical,
//   7  u8   dtype (raw)                    big-endian), zero without delta
//   8  u8   stored dtype          64 u64  xxh3-64 of header bytes [0, 64)
//   9  i8   zstd level            72 ...  body: body_length bytes
//  10  u8[6] reserved, zero
//  16  u64  raw_length (bytes)
// Decoding checks the body checksum before it touches the body and the
// stored checksum after undoing every stage.
// flags: bit 0 bf16 cast, bit 1 XOR delta, bit 2 zstd; other bits zero.
// transform: 0 none, 1 byte grouping, 2 exponent split.
//
// Thread-safety: every function is safe to call concurrently; each thread
// keeps its own zstd contexts and scratch buffers.

#ifndef HY_STATESTORE_CODEC_H_
#define HY_STATESTORE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/dtype.h"
#include "hy/common/hash.h"
#include "hy/common/result.h"
#include "hy/common/status.h"

namespace hy {
class ThreadPool;
}  // namespace hy

namespace hy::statestore {

inline constexpr uint32_t kChunkMagic = 0x4B435948;  // "HYCK" little-endian.
inline constexpr uint8_t kChunkFormatVersion = 2;    // What EncodeChunk writes.
inline constexpr uint8_t kOldestChunkFormat = 1;  // Oldest DecodeChunk reads.
inline constexpr size_t kChunkHeaderSize = 72;    // Version 1's header.
inline constexpr int kMaxChunkGroups = 8;
// Version 2's header for `groups` byte groups.
inline constexpr size_t ChunkHeaderSizeV2(int groups) {
  return 72 + 16 * static_cast<size_t>(groups);
}

enum class ByteTransform : uint8_t {
  kNone = 0,
  kByteGroup = 1,
  kExponentSplit = 2,  // f32 and bf16 (after any cast) only.
};

// Picks the transform by dtype: exponent split for f32/bf16 (byte grouping
// for an XOR delta of them: as small, and faster), byte grouping for other
// multi-byte types, none for one-byte types.
inline constexpr int kAutoTransform = -1;

struct EncodeOptions {
  // Cast f32 input to bf16 before the other stages (lossy). Ignored for other
  // dtypes.
  bool cast_to_bf16 = false;
  // kAutoTransform, or a ByteTransform value. kExponentSplit on a dtype that
  // has no exponent split falls back to byte grouping.
  int transform = kAutoTransform;
  bool zstd = true;
  // zstd level; 1 is the sweet spot on floats (level 3 gains nothing, and
  // negative levels skip literal Huffman coding and gain nothing either).
  int zstd_level = 1;
  // For an exponent-split chunk (f32 or bf16, no delta), zstd searches for
  // no matches and only Huffman-codes the bytes: float planes hardly repeat,
  // so this is 1.5-2.5x faster, decodes faster and comes out a little smaller
  // (0.831 against 0.840 of the f32 bytes of Adam state). The output is an
  // ordinary zstd frame. XOR deltas and other transforms keep the match
  // search, which their runs of zeros need.
  bool float_entropy_only = true;
  // Compression must make the body at least this much smaller than the
  // stored bytes, else the chunk is stored plainly.
  double min_compression_ratio = 1.02;
  // The base's ContentHash when the caller already knows it (a store keys
  // chunks by it); saves hashing the base again. Ignored without a base.
  const Hash128* base_hash = nullptr;
  // Version 2 only: the content address to record in the header (a store
  // passes its key for the chunk). Null records zero.
  const Hash128* address = nullptr;
  // 2 (default) or 1, the old single-frame format (tests, migration).
  int format_version = kChunkFormatVersion;
};

// How one byte group of a version 2 chunk is stored.
enum class GroupCodec : uint8_t { kRaw = 0, kZstd = 1 };

struct ChunkGroup {
  GroupCodec codec = GroupCodec::kRaw;
  uint64_t length = 0;    // Its bytes in the body.
  uint64_t checksum = 0;  // xxh3-64 of those bytes.
};

// The decoded header of an encoded chunk.
struct ChunkHeader {
  uint8_t version = kChunkFormatVersion;
  uint32_t header_length = kChunkHeaderSize;  // Bytes before the body.
  bool bf16_cast = false;
  bool xor_delta = false;
  bool zstd = false;
  ByteTransform transform = ByteTransform::kNone;
  DType dtype = DType::kU8;
  DType stored_dtype = DType::kU8;
  int8_t zstd_level = 0;
  uint64_t raw_length = 0;
  uint64_t body_length = 0;
  uint64_t checksum = 0;       // Version 1: xxh3-64 of the stored bytes.
  uint64_t body_checksum = 0;  // Version 1: xxh3-64 of the body.
  Hash128 base_hash;           // Zero unless xor_delta.
  Hash128 address;             // Version 2: the content address, or zero.
  int group_count = 0;         // Version 2: groups[0, group_count).
  ChunkGroup groups[kMaxChunkGroups];

  // Length of the stored bytes (after any cast) implied by the header.
  uint64_t StoredLength() const;
  uint64_t EncodedLength() const { return header_length + body_length; }
  // Version 2: bytes of byte group g once decoded (before any zstd, after
  // the transform): a plane, the last one with the trailing partial
  // element.
  uint64_t GroupDecodedLength(int g) const;
  // "dtype=F32 raw=1048576 body=... flags=cast|delta|zstd transform=..."
  std::string DebugString() const;
};

// A short name for how a chunk is encoded, stages joined by '+', e.g.
// "split+zstd", "bf16+delta+group+zstd", "plain". The same for both
// formats ("zstd": some group is compressed).
std::string EncodingName(const ChunkHeader& h);

// Encodes `raw` (elements of `dtype`) into `*out`, replacing its contents.
// `base`, when non-empty, is the previous version of the same region and must
// have raw.size() bytes; the chunk is then XOR-delta encoded against it.
// Returns InvalidArgument for an invalid dtype, a base of the wrong length,
// or an out-of-range option; Internal if zstd fails. *out is unspecified on
// failure.
Status EncodeChunk(const EncodeOptions& options, DType dtype, ConstBytes raw,
                   ConstBytes base, std::string* out);

// Parses and checks the header of `encoded` without touching the body.
// Returns DataLoss for a truncated or corrupt header (bad magic, checksum
// mismatch, inconsistent fields, encoded.size() != EncodedLength()), and
// InvalidArgument for a format version this build does not read.
Result<ChunkHeader> ParseChunkHeader(ConstBytes encoded);

// Checks the header and the body's checksums (version 2: every group's)
// without decoding: what a scrub of stored chunks needs. Returns the
// header, or the errors of ParseChunkHeader plus DataLoss for a body
// checksum mismatch.
Result<ChunkHeader> VerifyChunk(ConstBytes encoded);

// Decodes `encoded` into `out`, which must be exactly header.raw_length bytes.
// A delta chunk needs its `base` (the same bytes given to EncodeChunk);
// otherwise `base` is ignored.
// Returns DataLoss if the chunk is corrupt or truncated (any header field,
// the zstd frame, or the checksum of the decoded bytes); InvalidArgument if
// out has the wrong size, or the base is missing, of the wrong size, or not
// the one the chunk was encoded against. On failure `out` holds unspecified
// bytes: callers must not use them.
Status DecodeChunk(ConstBytes encoded, ConstBytes base, MutableBytes out);

// DecodeChunk without the checksum of the decoded bytes of a version 1
// chunk, for a caller that checks `out` against something at least as
// strong itself (the store compares a lossless chunk's ContentHash with its
// address): one pass over the bytes fewer. The header and the body checksum
// are still checked, so the decoder never runs on damaged input. A version
// 2 chunk is decoded exactly as DecodeChunk does (its checks are fused
// with decoding), and needs no check by the caller.
// REQUIRES: the caller verifies `out` of a version 1 chunk before using it.
Status DecodeChunkHashedByCaller(ConstBytes encoded, ConstBytes base,
                                 MutableBytes out);

// Upper bound of EncodeChunk's output size for `raw_length` input bytes
// (either format).
size_t MaxEncodedLength(size_t raw_length);

// ---- Many chunks at once ----------------------------------------------------

struct EncodeJob {
  DType dtype = DType::kU8;
  ConstBytes raw;
  ConstBytes base;             // Empty for no delta.
  std::string* out = nullptr;  // REQUIRES: non-null, distinct per job.
  Status status;               // Set by EncodeChunks.
};

struct DecodeJob {
  ConstBytes encoded;
  ConstBytes base;
  MutableBytes out;  // REQUIRES: disjoint from every other job's buffers.
  Status status;     // Set by DecodeChunks.
};

// Runs every job, spread over `pool` and the calling thread (serially when
// pool is null). Each job's status is set; returns OK if all succeeded, else
// the first failure in job order, with the job index in its message.
Status EncodeChunks(const EncodeOptions& options, ThreadPool* pool,
                    std::vector<EncodeJob>* jobs);
Status DecodeChunks(ThreadPool* pool, std::vector<DecodeJob>* jobs);

}  // namespace hy::statestore

#endif  // HY_STATESTORE_CODEC_H_
