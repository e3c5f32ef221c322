// Serialization and validation of the chunk header, versions 1 and 2 (see
// codec.h).

#include "chunk_header.h"

#include <cstring>
#include <string>

namespace hy::statestore {

namespace {

constexpr uint8_t kFlagBf16Cast = 1u << 0;
constexpr uint8_t kFlagXorDelta = 1u << 1;
constexpr uint8_t kFlagZstd = 1u << 2;
constexpr uint8_t kKnownFlags = kFlagBf16Cast | kFlagXorDelta | kFlagZstd;

// Largest raw length a header may claim (256 TiB): keeps every length
// computation far from overflow, and no chunk comes near it.
constexpr uint64_t kMaxRawLength = uint64_t{1} << 48;

void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

Status Corrupt(const std::string& what) {
  return Status::DataLoss("corrupt chunk header: " + what);
}

}  // namespace

uint64_t StoredLengthFor(bool bf16_cast, uint64_t raw_length) {
  return bf16_cast ? raw_length / 4 * 2 + raw_length % 4 : raw_length;
}

uint64_t ChunkHeader::StoredLength() const {
  return StoredLengthFor(bf16_cast, raw_length);
}

uint64_t GroupChecksumSeed(const uint8_t* header, int g) {
  return Checksum64(ConstBytes(header, 64)) ^
         (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(g + 1));
}

int GroupCount(ByteTransform t, DType stored) {
  return t == ByteTransform::kNone ? 1 : static_cast<int>(DTypeSize(stored));
}

uint64_t ChunkHeader::GroupDecodedLength(int g) const {
  const uint64_t stored = StoredLength();
  if (group_count <= 1) return stored;
  const uint64_t plane = stored / group_count;
  return g + 1 < group_count ? plane : stored - plane * (group_count - 1);
}

std::string ChunkHeader::DebugString() const {
  std::string flags;
  if (bf16_cast) flags += "cast|";
  if (xor_delta) flags += "delta|";
  if (zstd) flags += "zstd|";
  if (flags.empty()) flags = "plain|";
  flags.pop_back();
  static constexpr const char* kTransformNames[] = {"none", "byte-group",
                                                    "exponent-split"};
  std::string out = "v" + std::to_string(version);
  out += " dtype=" + std::string(SafetensorsName(dtype));
  out += " stored=" + std::string(SafetensorsName(stored_dtype));
  out += " raw=" + std::to_string(raw_length);
  out += " body=" + std::to_string(body_length);
  out += " flags=" + flags;
  out += " transform=";
  out += kTransformNames[static_cast<int>(transform) % 3];
  if (zstd) out += " level=" + std::to_string(zstd_level);
  if (version >= 2) {
    out += " groups=";  // One letter per byte group: r raw, z zstd.
    for (int g = 0; g < group_count; ++g) {
      out += groups[g].codec == GroupCodec::kZstd ? 'z' : 'r';
    }
  }
  if (xor_delta) out += " base=" + base_hash.ToHex();
  return out;
}

std::string EncodingName(const ChunkHeader& h) {
  std::string e;
  if (h.bf16_cast) e += "bf16+";
  if (h.xor_delta) e += "delta+";
  if (h.transform == ByteTransform::kByteGroup) e += "group+";
  if (h.transform == ByteTransform::kExponentSplit) e += "split+";
  e += h.zstd ? "zstd" : "plain";
  return e;
}

void SerializeChunkHeader(const ChunkHeader& h, uint8_t* out) {
  std::memset(out, 0, h.header_length);
  Put32(out + 0, kChunkMagic);
  out[4] = h.version;
  out[5] = static_cast<uint8_t>((h.bf16_cast ? kFlagBf16Cast : 0) |
                                (h.xor_delta ? kFlagXorDelta : 0) |
                                (h.zstd ? kFlagZstd : 0));
  out[6] = static_cast<uint8_t>(h.transform);
  out[7] = static_cast<uint8_t>(h.dtype);
  out[8] = static_cast<uint8_t>(h.stored_dtype);
  out[9] = static_cast<uint8_t>(h.zstd_level);
  Put64(out + 16, h.raw_length);
  Put64(out + 24, h.body_length);
  if (h.version == 1) {
    Put64(out + 32, h.checksum);
    Put64(out + 40, h.body_checksum);
    if (h.xor_delta) h.base_hash.EncodeTo(out + 48);
    Put64(out + 64, Checksum64(ConstBytes(out, 64)));
    return;
  }
  out[10] = static_cast<uint8_t>(h.group_count);
  h.address.EncodeTo(out + 32);
  if (h.xor_delta) h.base_hash.EncodeTo(out + 48);
  uint8_t* g = out + 64;
  for (int i = 0; i < h.group_count; ++i, g += 16) {
    Put64(g, h.groups[i].length |
                 uint64_t{static_cast<uint8_t>(h.groups[i].codec)} << 56);
    Put64(g + 8, h.groups[i].checksum);
  }
  Put64(g, Checksum64(ConstBytes(out, g - out)));
}

namespace {

// The fields after the checksum, common to both versions; `p` is checked.
Status ParseCommon(const uint8_t* p, ChunkHeader* out) {
  ChunkHeader& h = *out;
  const uint8_t flags = p[5];
  if (flags & ~kKnownFlags) return Corrupt("unknown flag bits");
  h.bf16_cast = flags & kFlagBf16Cast;
  h.xor_delta = flags & kFlagXorDelta;
  h.zstd = flags & kFlagZstd;
  if (p[6] > static_cast<uint8_t>(ByteTransform::kExponentSplit)) {
    return Corrupt("unknown transform " + std::to_string(p[6]));
  }
  h.transform = static_cast<ByteTransform>(p[6]);
  Result<DType> dtype = DTypeFromCode(p[7]);
  Result<DType> stored = DTypeFromCode(p[8]);
  if (!dtype.ok() || !stored.ok()) return Corrupt("unknown dtype code");
  h.dtype = *dtype;
  h.stored_dtype = *stored;
  h.zstd_level = static_cast<int8_t>(p[9]);
  h.raw_length = Get64(p + 16);
  h.body_length = Get64(p + 24);
  h.base_hash = Hash128::DecodeFrom(p + 48);
  if (h.bf16_cast ? (h.dtype != DType::kF32 || h.stored_dtype != DType::kBF16)
                  : h.stored_dtype != h.dtype) {
    return Corrupt("dtype and stored dtype disagree with the cast flag");
  }
  if (h.transform == ByteTransform::kExponentSplit &&
      h.stored_dtype != DType::kF32 && h.stored_dtype != DType::kBF16) {
    return Corrupt("exponent split on a dtype that has none");
  }
  if (!h.xor_delta && !h.base_hash.IsZero()) {
    return Corrupt("base hash set without the delta flag");
  }
  if (!h.zstd && h.zstd_level != 0) {
    return Corrupt("zstd level set without the zstd flag");
  }
  if (h.raw_length > kMaxRawLength) return Corrupt("absurd raw length");
  return Status::OK();
}

Status CheckEncodedLength(const ChunkHeader& h, size_t size) {
  if (h.body_length > kMaxRawLength ||
      h.header_length + h.body_length != size) {
    return Status::DataLoss(
        "chunk length mismatch: header says " +
        std::to_string(h.header_length + h.body_length) + " bytes, have " +
        std::to_string(size) +
        (size < h.header_length + h.body_length ? " (truncated)" : ""));
  }
  return Status::OK();
}

Result<ChunkHeader> ParseV2(ConstBytes encoded) {
  const uint8_t* p = encoded.data();
  const int groups = p[10];
  if (groups < 1 || groups > kMaxChunkGroups) {
    return Corrupt("group count " + std::to_string(groups));
  }
  const size_t header_length = ChunkHeaderSizeV2(groups);
  if (encoded.size() < header_length) {
    return Status::DataLoss("truncated chunk: " +
                            std::to_string(encoded.size()) +
                            " bytes, shorter than its " +
                            std::to_string(header_length) + "-byte header");
  }
  if (Checksum64(ConstBytes(p, header_length - 8)) !=
      Get64(p + header_length - 8)) {
    return Corrupt("header checksum mismatch");
  }
  ChunkHeader h;
  h.version = 2;
  h.header_length = static_cast<uint32_t>(header_length);
  HY_RETURN_IF_ERROR(ParseCommon(p, &h));
  for (int i = 11; i < 16; ++i) {
    if (p[i] != 0) return Corrupt("reserved bytes are not zero");
  }
  h.address = Hash128::DecodeFrom(p + 32);
  if (groups != GroupCount(h.transform, h.stored_dtype)) {
    return Corrupt(std::to_string(groups) + " byte groups for this transform");
  }
  h.group_count = groups;
  uint64_t body = 0;
  bool any_zstd = false;
  for (int i = 0; i < groups; ++i) {
    const uint8_t* g = p + 64 + 16 * i;
    const uint64_t word = Get64(g);
    const uint8_t codec = static_cast<uint8_t>(word >> 56);
    if (codec > static_cast<uint8_t>(GroupCodec::kZstd)) {
      return Corrupt("unknown group codec " + std::to_string(codec));
    }
    ChunkGroup& cg = h.groups[i];
    cg.codec = static_cast<GroupCodec>(codec);
    cg.length = word & ((uint64_t{1} << 56) - 1);
    cg.checksum = Get64(g + 8);
    if (cg.length > kMaxRawLength) return Corrupt("absurd group length");
    if (cg.codec == GroupCodec::kRaw &&
        cg.length != h.GroupDecodedLength(i)) {
      return Corrupt("raw group " + std::to_string(i) + " has " +
                     std::to_string(cg.length) + " bytes, want " +
                     std::to_string(h.GroupDecodedLength(i)));
    }
    any_zstd |= cg.codec == GroupCodec::kZstd;
    body += cg.length;
  }
  if (any_zstd != h.zstd) return Corrupt("zstd flag disagrees with groups");
  if (body != h.body_length) {
    return Corrupt("groups hold " + std::to_string(body) +
                   " bytes, the body " + std::to_string(h.body_length));
  }
  HY_RETURN_IF_ERROR(CheckEncodedLength(h, encoded.size()));
  return h;
}

}  // namespace

Result<ChunkHeader> ParseChunkHeader(ConstBytes encoded) {
  if (encoded.size() < kChunkHeaderSize) {
    return Status::DataLoss(
        "truncated chunk: " + std::to_string(encoded.size()) +
        " bytes, shorter than the " + std::to_string(kChunkHeaderSize) +
        "-byte header");
  }
  const uint8_t* p = encoded.data();
  if (Get32(p) != kChunkMagic) return Corrupt("bad magic (not an hy chunk)");
  // The version byte is read before the checksum that covers it: a damaged
  // one fails that checksum (version 2's header checksum sits elsewhere)
  // or names a version no build wrote.
  if (p[4] == 2) return ParseV2(encoded);
  if (Checksum64(ConstBytes(p, 64)) != Get64(p + 64)) {
    return Corrupt("header checksum mismatch");
  }
  if (p[4] != 1) {
    return Status::InvalidArgument(
        "unsupported chunk format version " + std::to_string(p[4]) +
        " (this build reads versions " + std::to_string(kOldestChunkFormat) +
        " to " + std::to_string(kChunkFormatVersion) + ")");
  }
  ChunkHeader h;
  h.version = 1;
  h.header_length = kChunkHeaderSize;
  HY_RETURN_IF_ERROR(ParseCommon(p, &h));
  for (int i = 10; i < 16; ++i) {
    if (p[i] != 0) return Corrupt("reserved bytes are not zero");
  }
  h.checksum = Get64(p + 32);
  h.body_checksum = Get64(p + 40);
  if (!h.zstd && h.body_length != h.StoredLength()) {
    return Corrupt("uncompressed body length " + std::to_string(h.body_length) +
                   " != stored length " + std::to_string(h.StoredLength()));
  }
  HY_RETURN_IF_ERROR(CheckEncodedLength(h, encoded.size()));
  return h;
}

}  // namespace hy::statestore
