// libFuzzer target for the chunk decoder. The first input byte picks a mode:
//   0: decode the rest as an encoded chunk, as read from a damaged store;
//   1: encode the rest (with options taken from its first bytes), check the
//      round trip, then damage one byte and check the damage is reported;
//   2: wrap the rest as the body of a chunk whose header is valid and
//      sealed, so the zstd, transform and delta stages see hostile bodies;
//   3: the same for a version 2 chunk: byte groups raw or zstd as the input
//      says, each with a valid checksum, so the frames, the fused merge and
//      the tail handling see hostile groups.
// Mode 1 writes version 2 chunks, or version 1 when its option byte says.
// Any crash, sanitizer report or __builtin_trap() is a finding.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "chunk_header.h"
#include "hy/statestore/codec.h"

namespace {

using hy::ConstBytes;
using hy::DType;
using hy::MutableBytes;
using hy::statestore::ChunkHeader;
using hy::statestore::DecodeChunk;
using hy::statestore::kChunkHeaderSize;

constexpr uint64_t kMaxRaw = 1 << 20;

DType PickDType(uint8_t b) { return hy::kAllDTypes[b % 9]; }

void DecodeAsIs(const uint8_t* data, size_t size) {
  auto h = hy::statestore::ParseChunkHeader(ConstBytes(data, size));
  if (!h.ok() || h->raw_length > kMaxRaw) return;
  std::vector<uint8_t> out(h->raw_length);
  std::vector<uint8_t> base(h->xor_delta ? h->raw_length : 0, 0);
  hy::Status s = DecodeChunk(ConstBytes(data, size), base, MutableBytes(out));
  // A zero base can only be right if the chunk says so.
  if (s.ok() && h->xor_delta && h->base_hash != hy::ContentHash(base)) {
    __builtin_trap();
  }
}

void RoundTripThenDamage(const uint8_t* data, size_t size) {
  if (size < 4) return;
  const DType dtype = PickDType(data[0]);
  hy::statestore::EncodeOptions o;
  o.cast_to_bf16 = data[1] & 1;
  o.zstd = data[1] & 2;
  o.transform = static_cast<int>(data[1] >> 2) % 4 - 1;
  const bool delta = data[1] & 0x40;
  o.format_version = data[1] & 0x80 ? 1 : 2;
  const size_t damage_at = data[2] | static_cast<size_t>(data[3]) << 8;
  const std::vector<uint8_t> raw(data + 4, data + size);
  std::vector<uint8_t> base(delta ? raw.size() : 0);
  for (size_t i = 0; i < base.size(); ++i) base[i] = raw[raw.size() - 1 - i];

  std::string enc;
  if (!hy::statestore::EncodeChunk(o, dtype, raw, base, &enc).ok()) {
    __builtin_trap();  // Valid options never fail.
  }
  std::vector<uint8_t> out(raw.size());
  if (!DecodeChunk(enc, base, MutableBytes(out)).ok()) __builtin_trap();
  const bool cast = o.cast_to_bf16 && dtype == DType::kF32;
  if (!cast && out != raw) __builtin_trap();

  std::string bad = enc;
  bad[damage_at % bad.size()] ^= 0x5A;
  if (DecodeChunk(bad, base, MutableBytes(out)).ok()) __builtin_trap();
}

void HostileBody(const uint8_t* data, size_t size) {
  if (size < 4) return;
  ChunkHeader h;
  h.version = 1;
  h.header_length = kChunkHeaderSize;
  h.dtype = PickDType(data[0]);
  h.bf16_cast = (data[1] & 1) && h.dtype == DType::kF32;
  h.stored_dtype = h.bf16_cast ? DType::kBF16 : h.dtype;
  h.zstd = data[1] & 2;
  h.zstd_level = h.zstd ? 1 : 0;
  h.xor_delta = data[1] & 4;
  const uint8_t t = (data[1] >> 3) % 3;
  const bool has_split =
      h.stored_dtype == DType::kF32 || h.stored_dtype == DType::kBF16;
  h.transform =
      static_cast<hy::statestore::ByteTransform>(t == 2 && !has_split ? 1 : t);
  const std::vector<uint8_t> body(data + 4, data + size);
  h.raw_length =
      h.zstd ? (data[2] | static_cast<uint64_t>(data[3]) << 8) : body.size();
  if (h.bf16_cast && !h.zstd) h.raw_length = body.size() * 2;  // Roughly.
  if (hy::statestore::StoredLengthFor(h.bf16_cast, h.raw_length) !=
          body.size() &&
      !h.zstd) {
    return;
  }
  std::vector<uint8_t> base(h.xor_delta ? h.raw_length : 0, 0x11);
  if (h.xor_delta) h.base_hash = hy::ContentHash(base);
  h.body_length = body.size();
  h.body_checksum = hy::Checksum64(body);
  h.checksum = 0x0123456789abcdefull;
  std::string enc(kChunkHeaderSize, '\0');
  hy::statestore::SerializeChunkHeader(h,
                                       reinterpret_cast<uint8_t*>(enc.data()));
  enc.append(body.begin(), body.end());
  std::vector<uint8_t> out(h.raw_length);
  (void)DecodeChunk(enc, base, MutableBytes(out));
}

void HostileGroups(const uint8_t* data, size_t size) {
  if (size < 5) return;
  ChunkHeader h;
  h.version = 2;
  h.dtype = PickDType(data[0]);
  h.bf16_cast = (data[1] & 1) && h.dtype == DType::kF32;
  h.stored_dtype = h.bf16_cast ? DType::kBF16 : h.dtype;
  h.xor_delta = data[1] & 4;
  const uint8_t t = (data[1] >> 3) % 3;
  const bool has_split =
      h.stored_dtype == DType::kF32 || h.stored_dtype == DType::kBF16;
  h.transform = static_cast<hy::statestore::ByteTransform>(
      t == 2 && !has_split ? 1 : t);
  if (hy::DTypeSize(h.stored_dtype) == 1) {
    h.transform = hy::statestore::ByteTransform::kNone;
  }
  h.raw_length = (data[3] | static_cast<uint64_t>(data[4]) << 8) % 4096;
  h.group_count = hy::statestore::GroupCount(h.transform, h.stored_dtype);
  const std::vector<uint8_t> body(data + 5, data + size);
  // Raw groups take their decoded length; the zstd ones (data[2]'s bits)
  // share what is left of the body.
  uint64_t raw_bytes = 0;
  int zstd_groups = 0;
  for (int g = 0; g < h.group_count; ++g) {
    const bool z = (data[2] >> g) & 1;
    h.groups[g].codec = z ? hy::statestore::GroupCodec::kZstd
                          : hy::statestore::GroupCodec::kRaw;
    if (z) {
      ++zstd_groups;
    } else {
      h.groups[g].length = h.GroupDecodedLength(g);
      raw_bytes += h.groups[g].length;
    }
  }
  if (raw_bytes > body.size()) return;
  uint64_t left = body.size() - raw_bytes;
  for (int g = 0, z = 0; g < h.group_count; ++g) {
    if (h.groups[g].codec != hy::statestore::GroupCodec::kZstd) continue;
    ++z;
    h.groups[g].length = z == zstd_groups ? left : left / zstd_groups;
    left -= h.groups[g].length;
  }
  h.zstd = zstd_groups > 0;
  h.zstd_level = h.zstd ? 1 : 0;
  std::vector<uint8_t> base(h.xor_delta ? h.raw_length : 0, 0x11);
  if (h.xor_delta) h.base_hash = hy::ContentHash(base);
  h.body_length = body.size();
  h.header_length =
      static_cast<uint32_t>(hy::statestore::ChunkHeaderSizeV2(h.group_count));
  std::string enc(h.header_length, '\0');
  uint8_t* header = reinterpret_cast<uint8_t*>(enc.data());
  hy::statestore::SerializeChunkHeader(h, header);
  uint64_t at = 0;
  for (int g = 0; g < h.group_count; ++g) {
    h.groups[g].checksum = hy::Checksum64(
        ConstBytes(body.data() + at, h.groups[g].length),
        hy::statestore::GroupChecksumSeed(header, g));
    at += h.groups[g].length;
  }
  hy::statestore::SerializeChunkHeader(h, header);
  enc.append(body.begin(), body.end());
  std::vector<uint8_t> out(h.raw_length);
  (void)DecodeChunk(enc, base, MutableBytes(out));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  switch (data[0] % 4) {
    case 0:
      DecodeAsIs(data + 1, size - 1);
      break;
    case 1:
      RoundTripThenDamage(data + 1, size - 1);
      break;
    case 2:
      HostileBody(data + 1, size - 1);
      break;
    case 3:
      HostileGroups(data + 1, size - 1);
      break;
  }
  return 0;
}
