// Version 2 of the chunk format (see codec.h): byte groups stored raw or as
// zstd frames, each with its checksum, and the decoder that checks the raw
// groups in the same pass that merges them into the destination.

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "byte_group.h"
#include "chunk_header.h"
#include "codec_internal.h"
#include "hy/common/bf16.h"
#include "hy/common/hash.h"

namespace hy::statestore::internal {

namespace {

// Elements per block of the fused decode: the block's stored bytes are
// checked, then merged, while they sit in the first-level cache.
constexpr size_t kBlockElements = 8192;

// A chunk's byte groups are the planes the merge kernels take.
static_assert(kMaxChunkGroups <= static_cast<int>(kMaxPlanes),
              "a version 2 chunk's groups must fit UngroupPlanes");

// Merges m elements, starting at element i, from the planes into dst (m
// stored elements).
void MergeBlock(const ChunkHeader& h, const uint8_t* const* plane, size_t i,
                size_t m, uint8_t* dst) {
  const size_t es = DTypeSize(h.stored_dtype);
  if (h.transform == ByteTransform::kNone) {
    CopyBytes(dst, plane[0] + i * es, m * es);
    return;
  }
  const uint8_t* p[kMaxChunkGroups];
  for (int g = 0; g < h.group_count; ++g) p[g] = plane[g] + i;
  if (h.transform == ByteTransform::kExponentSplit &&
      h.stored_dtype == DType::kF32) {
    MergeExponentF32Planes(p[0], p[1], p[2], p[3], m, dst);
  } else if (h.transform == ByteTransform::kExponentSplit) {
    MergeExponentBf16Planes(p[0], p[1], m, dst);
  } else {
    UngroupPlanes(p, m, es, dst);
  }
}

// A group at least this long is first tried on a sample (kProbeSlices
// slices of kProbeSlice bytes spread over it, the last at its end): zstd
// reads every byte of a group it tries, and an incompressible one it still
// counts and copies into a raw frame (1 MiB of random bytes at 4.6 GB/s on
// one core here, memcpy at 19): for the mantissa planes of trained
// weights that cost more than the split itself.
constexpr size_t kProbeSlice = 16 << 10;
constexpr size_t kProbeSlices = 4;
constexpr size_t kProbeBytes = kProbeSlices * kProbeSlice;  // The sample.
constexpr size_t kProbeMin = 16 * kProbeBytes;              // 1 MiB.

// Whether zstd compressing `len` bytes at `src` might pay: false when a
// sample of them does not. REQUIRES: the context is set up; dst has
// ZSTD_compressBound(kProbeBytes) bytes.
Result<bool> SampleCompresses(ZSTD_CCtx* cctx, const uint8_t* src, uint64_t len,
                              double min_ratio, uint8_t* sample, uint8_t* dst) {
  if (len < kProbeMin) return true;
  const uint64_t stride = (len - kProbeSlice) / (kProbeSlices - 1);
  for (size_t k = 0; k < kProbeSlices; ++k) {
    std::memcpy(sample + k * kProbeSlice, src + k * stride, kProbeSlice);
  }
  const size_t in = kProbeBytes;
  const size_t n =
      ZSTD_compress2(cctx, dst, ZSTD_compressBound(in), sample, in);
  if (ZSTD_isError(n)) {
    return Status::Internal(std::string("zstd compression failed: ") +
                            ZSTD_getErrorName(n));
  }
  return static_cast<double>(n) * min_ratio <= static_cast<double>(in);
}

}  // namespace

Status EncodeGroupsV2(const EncodeOptions& options, ChunkHeader* hp,
                      const uint8_t* work, const uint8_t* stored,
                      std::string* out) {
  ChunkHeader& h = *hp;
  h.version = 2;
  h.checksum = h.body_checksum = 0;
  h.address = options.address != nullptr ? *options.address : Hash128();
  h.group_count = GroupCount(h.transform, h.stored_dtype);
  ThreadScratch& scratch = Scratch();
  const bool delta = h.xor_delta;

  // Each group: zstd when that makes it min_compression_ratio smaller.
  const uint8_t* bytes[kMaxChunkGroups];
  bool any_zstd = false;
  uint64_t at = 0;
  for (int g = 0; g < h.group_count; ++g) {
    h.groups[g] = {GroupCodec::kRaw, h.GroupDecodedLength(g), 0};
    bytes[g] = work + at;
    at += h.groups[g].length;
  }
  if (options.zstd) {
    uint64_t bound = 0;
    for (int g = 0; g < h.group_count; ++g) {
      bound += ZSTD_compressBound(h.GroupDecodedLength(g));
    }
    const size_t sample_len = kProbeBytes;
    uint8_t* dst =
        scratch.Buffer(3, bound + sample_len + ZSTD_compressBound(sample_len));
    uint8_t* sample = dst + bound;
    uint8_t* sample_dst = sample + sample_len;
    const bool entropy_only = options.float_entropy_only && !delta &&
                              h.transform == ByteTransform::kExponentSplit;
    HY_RETURN_IF_ERROR(
        scratch.SetUp(options.zstd_level, entropy_only ? kNoMatchSearch : 0));
    for (int g = 0; g < h.group_count; ++g) {
      const uint64_t len = h.groups[g].length;
      const uint8_t* src = bytes[g];
      if (len == 0) continue;
      // An exponent plane and a delta's groups are tried whole (they
      // nearly always compress); any other group first on a sample.
      if (!delta && (g > 0 || h.transform != ByteTransform::kExponentSplit)) {
        HY_ASSIGN_OR_RETURN(const bool worth,
                            SampleCompresses(scratch.cctx(), src, len,
                                             options.min_compression_ratio,
                                             sample, sample_dst));
        if (!worth) continue;
      }
      const size_t cap = ZSTD_compressBound(len);
      const size_t n = ZSTD_compress2(scratch.cctx(), dst, cap, src, len);
      if (ZSTD_isError(n)) {
        return Status::Internal(std::string("zstd compression failed: ") +
                                ZSTD_getErrorName(n));
      }
      if (static_cast<double>(n) * options.min_compression_ratio <=
          static_cast<double>(len)) {
        h.groups[g] = {GroupCodec::kZstd, n, 0};
        bytes[g] = dst;
        dst += n;
        any_zstd = true;
      }
    }
  }
  if (options.zstd && !any_zstd) {
    // Nothing compresses: the stored bytes plainly, free of any base and
    // decoded at memcpy speed.
    h.xor_delta = false;
    h.base_hash = Hash128();
    h.transform = ByteTransform::kNone;
    h.group_count = 1;
    h.groups[0] = {GroupCodec::kRaw, h.StoredLength(), 0};
    bytes[0] = stored;
  }
  h.zstd = any_zstd;
  h.zstd_level = any_zstd ? static_cast<int8_t>(options.zstd_level) : 0;
  h.body_length = 0;
  for (int g = 0; g < h.group_count; ++g) h.body_length += h.groups[g].length;
  h.header_length = static_cast<uint32_t>(ChunkHeaderSizeV2(h.group_count));
  // The group checksums are seeded by the header's first 64 bytes, which
  // do not depend on them: serialize, checksum, serialize again.
  out->clear();
  out->resize(h.header_length);
  uint8_t* header = reinterpret_cast<uint8_t*>(out->data());
  SerializeChunkHeader(h, header);
  for (int g = 0; g < h.group_count; ++g) {
    h.groups[g].checksum = Checksum64(ConstBytes(bytes[g], h.groups[g].length),
                                      GroupChecksumSeed(header, g));
  }
  SerializeChunkHeader(h, header);
  out->reserve(h.header_length + h.body_length);
  for (int g = 0; g < h.group_count; ++g) {
    if (h.groups[g].length == 0) continue;
    out->append(reinterpret_cast<const char*>(bytes[g]), h.groups[g].length);
  }
  return Status::OK();
}

Status DecodeV2(const ChunkHeader& h, ConstBytes encoded, ConstBytes base,
                MutableBytes out) {
  ThreadScratch& scratch = Scratch();
  const uint8_t* body = encoded.data() + h.header_length;

  // The zstd groups are small (exponent planes, deltas): check their frames
  // whole, then decompress them into scratch. The raw groups stay where
  // they are and are checked block by block below.
  uint64_t zstd_bytes = 0;
  for (int g = 0; g < h.group_count; ++g) {
    if (h.groups[g].codec == GroupCodec::kZstd) {
      zstd_bytes += h.GroupDecodedLength(g);
    }
  }
  uint8_t* planes_buf = scratch.Buffer(1, zstd_bytes);
  const uint8_t* plane[kMaxChunkGroups];
  std::unique_ptr<Hasher64> raw_sum[kMaxChunkGroups];
  uint64_t at = 0;
  for (int g = 0; g < h.group_count; ++g) {
    const ChunkGroup& cg = h.groups[g];
    const uint8_t* bytes = body + at;
    at += cg.length;
    const uint64_t seed = GroupChecksumSeed(encoded.data(), g);
    if (cg.codec == GroupCodec::kRaw) {
      plane[g] = bytes;
      raw_sum[g] = std::make_unique<Hasher64>(seed);
      continue;
    }
    const std::string which = "chunk byte group " + std::to_string(g);
    if (Checksum64(ConstBytes(bytes, cg.length), seed) != cg.checksum) {
      return Status::DataLoss(which + " checksum mismatch");
    }
    const uint64_t want = h.GroupDecodedLength(g);
    const unsigned long long frame = ZSTD_getFrameContentSize(bytes, cg.length);
    if (frame != want) {
      return Status::DataLoss(which + ": " +
                              (frame == ZSTD_CONTENTSIZE_ERROR
                                   ? std::string("not a zstd frame")
                                   : "zstd frame size disagrees with header"));
    }
    // One zstd group and nothing to undo after it: straight into `out`.
    uint8_t* into =
        h.transform == ByteTransform::kNone && !h.xor_delta && !h.bf16_cast
            ? out.data()
            : planes_buf;
    const size_t n =
        ZSTD_decompressDCtx(scratch.dctx(), into, want, bytes, cg.length);
    if (ZSTD_isError(n) || n != want) {
      return Status::DataLoss(
          which + ": zstd: " +
          (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short frame"));
    }
    if (into == out.data()) return Status::OK();
    plane[g] = planes_buf;
    planes_buf += want;
  }

  // Block by block: check the raw groups' bytes, merge them (and the
  // decompressed ones) into the stored elements, undo the delta and the
  // cast. Without delta and cast the merge writes straight into `out`.
  const size_t es = DTypeSize(h.stored_dtype);
  const size_t raw_es = DTypeSize(h.dtype);
  const size_t unit = h.transform == ByteTransform::kNone ? es : 1;
  const size_t n = h.StoredLength() / es;  // Stored elements, as merged.
  // Elements that are elements of the raw dtype too. A cast chunk's raw
  // trailing partial element is stored verbatim, and may span one more
  // stored element: its bytes go to the tail with the rest.
  const size_t n_main = std::min(n, h.raw_length / raw_es);
  const bool direct = !h.xor_delta && !h.bf16_cast;
  uint8_t* block = direct ? nullptr : scratch.Buffer(2, kBlockElements * es);
  uint8_t* base_block = h.xor_delta && h.bf16_cast
                            ? scratch.Buffer(0, kBlockElements * 2)
                            : nullptr;
  uint8_t tail[2 * kMaxChunkGroups];
  size_t tail_len = 0;
  for (size_t i = 0; i < n; i += kBlockElements) {
    const size_t m = std::min(kBlockElements, n - i);
    const size_t mm = i < n_main ? std::min(m, n_main - i) : 0;
    for (int g = 0; g < h.group_count; ++g) {
      if (raw_sum[g]) {
        raw_sum[g]->Update(ConstBytes(plane[g] + i * unit, m * unit));
      }
    }
    uint8_t* dst = direct ? out.data() + i * es : block;
    MergeBlock(h, plane, i, m, dst);
    if (direct) continue;
    CopyBytes(tail + tail_len, dst + mm * es, (m - mm) * es);
    tail_len += (m - mm) * es;
    if (h.xor_delta) {
      const uint8_t* b = base.data() + i * raw_es;
      if (h.bf16_cast) {
        CastF32ToBf16(b, base_block, mm);
        b = base_block;
      }
      XorBytes(dst, b, mm * es, h.bf16_cast ? dst : out.data() + i * es);
    }
    if (h.bf16_cast) WidenBf16ToF32(dst, out.data() + i * raw_es, mm);
  }
  // The trailing partial element: the last group's last bytes, verbatim.
  const int last = h.group_count - 1;
  const size_t plane_tail = h.StoredLength() - n * es;
  if (plane_tail > 0) {
    const uint8_t* t = plane[last] + n * unit;
    if (raw_sum[last]) raw_sum[last]->Update(ConstBytes(t, plane_tail));
    CopyBytes(tail + tail_len, t, plane_tail);
    tail_len += plane_tail;
  }
  if (tail_len > 0) {
    uint8_t* o = out.data() + n_main * raw_es;
    if (h.xor_delta) {
      XorBytes(tail, base.data() + n_main * raw_es, tail_len, o);
    } else {
      CopyBytes(o, tail, tail_len);
    }
  }
  for (int g = 0; g < h.group_count; ++g) {
    if (raw_sum[g] && raw_sum[g]->Digest() != h.groups[g].checksum) {
      return Status::DataLoss("chunk byte group " + std::to_string(g) +
                              " checksum mismatch");
    }
  }
  return Status::OK();
}

}  // namespace hy::statestore::internal
