// The encode and decode pipelines of the chunk codec (see codec.h).

#include "hy/statestore/codec.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "byte_group.h"
#include "chunk_header.h"
#include "codec_internal.h"
#include "hy/common/bf16.h"

namespace hy::statestore {

namespace {

using internal::CastToStored;
using internal::CopyBytes;
using internal::GroupBytes;
using internal::kNoMatchSearch;
using internal::Scratch;
using internal::ThreadScratch;
using internal::UngroupBytes;
using internal::XorBytes;

ByteTransform ResolveTransform(int requested, DType stored, bool delta) {
  const bool has_split = stored == DType::kF32 || stored == DType::kBF16;
  if (requested == kAutoTransform) {
    if (has_split && !delta) return ByteTransform::kExponentSplit;
    return DTypeSize(stored) > 1 ? ByteTransform::kByteGroup
                                 : ByteTransform::kNone;
  }
  const auto t = static_cast<ByteTransform>(requested);
  if (t == ByteTransform::kExponentSplit && !has_split) {
    return ByteTransform::kByteGroup;
  }
  return t;
}

// Applies `t` to the whole elements of in[0, len) and copies the trailing
// partial element verbatim.
void ApplyTransform(ByteTransform t, DType dtype, const uint8_t* in, size_t len,
                    uint8_t* out) {
  const size_t es = DTypeSize(dtype);
  const size_t n = len / es;
  if (t == ByteTransform::kExponentSplit && dtype == DType::kBF16) {
    internal::SplitExponentBf16(in, n, out);
  } else if (t == ByteTransform::kExponentSplit && dtype == DType::kF32) {
    internal::SplitExponentF32(in, n, out);
  } else {
    GroupBytes(in, n, es, out);
  }
  CopyBytes(out + n * es, in + n * es, len - n * es);
}

void UndoTransform(ByteTransform t, DType dtype, const uint8_t* in, size_t len,
                   uint8_t* out) {
  const size_t es = DTypeSize(dtype);
  const size_t n = len / es;
  if (t == ByteTransform::kExponentSplit && dtype == DType::kBF16) {
    internal::MergeExponentBf16(in, n, out);
  } else if (t == ByteTransform::kExponentSplit && dtype == DType::kF32) {
    internal::MergeExponentF32(in, n, out);
  } else {
    UngroupBytes(in, n, es, out);
  }
  CopyBytes(out + n * es, in + n * es, len - n * es);
}

void WidenFromStored(const uint8_t* stored, MutableBytes out) {
  const size_t n = out.size() / 4;
  WidenBf16ToF32(stored, out.data(), n);
  CopyBytes(out.data() + 4 * n, stored + 2 * n, out.size() - 4 * n);
}

Status CheckOptions(const EncodeOptions& o) {
  if (o.transform < kAutoTransform ||
      o.transform > static_cast<int>(ByteTransform::kExponentSplit)) {
    return Status::InvalidArgument("unknown byte transform " +
                                   std::to_string(o.transform));
  }
  if (o.zstd && (o.zstd_level < ZSTD_minCLevel() || o.zstd_level > 127 ||
                 o.zstd_level > ZSTD_maxCLevel())) {
    return Status::InvalidArgument(
        "zstd level " + std::to_string(o.zstd_level) + " out of range");
  }
  if (o.format_version != 1 && o.format_version != 2) {
    return Status::InvalidArgument("chunk format version " +
                                   std::to_string(o.format_version) +
                                   " (writes 1 or 2)");
  }
  if (!(o.min_compression_ratio >= 1.0) ||
      !std::isfinite(o.min_compression_ratio)) {
    return Status::InvalidArgument("min_compression_ratio must be >= 1");
  }
  return Status::OK();
}

}  // namespace

namespace internal {

ThreadScratch& Scratch() {
  thread_local ThreadScratch scratch;
  return scratch;
}

void CastToStored(ConstBytes raw, uint8_t* out) {
  const size_t n = raw.size() / 4;
  CastF32ToBf16(raw.data(), out, n);
  CopyBytes(out + 2 * n, raw.data() + 4 * n, raw.size() - 4 * n);
}

}  // namespace internal

size_t MaxEncodedLength(size_t raw_length) {
  // Version 2 compresses each group apart: one frame's overhead per group.
  return ChunkHeaderSizeV2(kMaxChunkGroups) + ZSTD_compressBound(raw_length) +
         kMaxChunkGroups * ZSTD_compressBound(0);
}

Status EncodeChunk(const EncodeOptions& options, DType dtype, ConstBytes raw,
                   ConstBytes base, std::string* out) {
  if (DTypeSize(dtype) == 0) return Status::InvalidArgument("invalid dtype");
  HY_RETURN_IF_ERROR(CheckOptions(options));
  const bool delta = !base.empty();
  if (delta && base.size() != raw.size()) {
    return Status::InvalidArgument(
        "delta base has " + std::to_string(base.size()) + " bytes, chunk has " +
        std::to_string(raw.size()));
  }
  ThreadScratch& scratch = Scratch();

  ChunkHeader h;
  h.bf16_cast = options.cast_to_bf16 && dtype == DType::kF32;
  h.dtype = dtype;
  h.stored_dtype = h.bf16_cast ? DType::kBF16 : dtype;
  h.raw_length = raw.size();
  const size_t stored_len = StoredLengthFor(h.bf16_cast, raw.size());

  // Stage 1: cast.
  const uint8_t* stored = raw.data();
  if (h.bf16_cast) {
    uint8_t* buf = scratch.Buffer(0, stored_len);
    CastToStored(raw, buf);
    stored = buf;
  }
  // Version 1 checks the decoded bytes against this; version 2 checks each
  // stored group instead and does not read the chunk a second time for it.
  if (options.format_version == 1) {
    h.checksum = Checksum64(ConstBytes(stored, stored_len));
  }

  // Stage 2: XOR delta against the (cast) base.
  const uint8_t* work = stored;
  if (delta) {
    h.xor_delta = true;
    h.base_hash = options.base_hash ? *options.base_hash : ContentHash(base);
    uint8_t* buf = scratch.Buffer(1, stored_len);
    if (h.bf16_cast) {
      CastToStored(base, buf);
      XorBytes(buf, stored, stored_len, buf);
    } else {
      XorBytes(base.data(), stored, stored_len, buf);
    }
    work = buf;
  }

  // Stage 3: byte transform.
  h.transform = ResolveTransform(options.transform, h.stored_dtype, delta);
  if (h.transform != ByteTransform::kNone) {
    uint8_t* buf = scratch.Buffer(2, stored_len);
    ApplyTransform(h.transform, h.stored_dtype, work, stored_len, buf);
    work = buf;
  }

  if (options.format_version == 2) {
    return internal::EncodeGroupsV2(options, &h, work, stored, out);
  }

  // Stage 4: zstd, unless it does not pay. Compression goes through a
  // per-thread buffer, so *out is allocated once, at its final size, and
  // never zero-filled.
  const uint8_t* body = work;
  size_t body_length = stored_len;
  if (options.zstd) {
    const size_t bound = ZSTD_compressBound(stored_len);
    uint8_t* dst = scratch.Buffer(3, bound);
    const bool entropy_only = options.float_entropy_only && !delta &&
                              h.transform == ByteTransform::kExponentSplit;
    HY_RETURN_IF_ERROR(
        scratch.SetUp(options.zstd_level, entropy_only ? kNoMatchSearch : 0));
    const size_t n =
        ZSTD_compress2(scratch.cctx(), dst, bound, work, stored_len);
    if (ZSTD_isError(n)) {
      return Status::Internal(std::string("zstd compression failed: ") +
                              ZSTD_getErrorName(n));
    }
    if (static_cast<double>(n) * options.min_compression_ratio <=
            static_cast<double>(stored_len) &&
        stored_len > 0) {
      h.zstd = true;
      h.zstd_level = static_cast<int8_t>(options.zstd_level);
      body = dst;
      body_length = n;
    } else {
      // Not worth it: store the stored bytes plainly, free of any base.
      h.xor_delta = false;
      h.base_hash = Hash128();
      h.transform = ByteTransform::kNone;
      body = stored;
    }
  }
  h.version = 1;
  h.header_length = kChunkHeaderSize;
  h.body_length = body_length;
  h.body_checksum = Checksum64(ConstBytes(body, body_length));
  uint8_t header[kChunkHeaderSize];
  SerializeChunkHeader(h, header);
  out->clear();
  out->reserve(kChunkHeaderSize + body_length);
  out->append(reinterpret_cast<const char*>(header), kChunkHeaderSize);
  if (body_length > 0) {
    out->append(reinterpret_cast<const char*>(body), body_length);
  }
  return Status::OK();
}

Result<ChunkHeader> VerifyChunk(ConstBytes encoded) {
  HY_ASSIGN_OR_RETURN(ChunkHeader h, ParseChunkHeader(encoded));
  if (h.version == 1) {
    if (Checksum64(encoded.subspan(kChunkHeaderSize)) != h.body_checksum) {
      return Status::DataLoss("chunk body checksum mismatch");
    }
    return h;
  }
  uint64_t at = h.header_length;
  for (int g = 0; g < h.group_count; ++g) {
    if (Checksum64(encoded.subspan(at, h.groups[g].length),
                   GroupChecksumSeed(encoded.data(), g)) !=
        h.groups[g].checksum) {
      return Status::DataLoss("chunk byte group " + std::to_string(g) +
                              " checksum mismatch");
    }
    at += h.groups[g].length;
  }
  return h;
}

namespace {

Status Decode(ConstBytes encoded, ConstBytes base, MutableBytes out,
              bool check_decoded) {
  HY_ASSIGN_OR_RETURN(const ChunkHeader h, ParseChunkHeader(encoded));
  if (h.version == 1 &&
      Checksum64(encoded.subspan(kChunkHeaderSize)) != h.body_checksum) {
    return Status::DataLoss("chunk body checksum mismatch");
  }
  if (out.size() != h.raw_length) {
    return Status::InvalidArgument(
        "output buffer has " + std::to_string(out.size()) +
        " bytes, chunk decodes to " + std::to_string(h.raw_length));
  }
  if (h.xor_delta) {
    if (base.size() != h.raw_length) {
      return Status::InvalidArgument(
          base.empty()
              ? std::string("delta chunk needs its base")
              : "delta base has " + std::to_string(base.size()) +
                    " bytes, chunk has " + std::to_string(h.raw_length));
    }
    if (ContentHash(base) != h.base_hash) {
      return Status::InvalidArgument("wrong delta base: chunk wants " +
                                     h.base_hash.ToHex() + ", got " +
                                     ContentHash(base).ToHex());
    }
  }
  if (h.version == 2) return internal::DecodeV2(h, encoded, base, out);
  ThreadScratch& scratch = Scratch();
  const size_t stored_len = h.StoredLength();
  const ConstBytes body = encoded.subspan(kChunkHeaderSize);
  uint8_t* stored = h.bf16_cast ? scratch.Buffer(0, stored_len) : out.data();

  // Undo zstd.
  const uint8_t* cur = body.data();
  if (h.zstd) {
    const unsigned long long frame_size =
        ZSTD_getFrameContentSize(body.data(), body.size());
    if (frame_size != stored_len) {
      return Status::DataLoss(
          frame_size == ZSTD_CONTENTSIZE_ERROR
              ? std::string("corrupt chunk body: not a zstd frame")
              : "corrupt chunk body: zstd frame size disagrees with header");
    }
    uint8_t* dst = h.transform != ByteTransform::kNone
                       ? scratch.Buffer(1, stored_len)
                       : stored;
    const size_t n = ZSTD_decompressDCtx(scratch.dctx(), dst, stored_len,
                                         body.data(), body.size());
    if (ZSTD_isError(n)) {
      return Status::DataLoss(std::string("corrupt chunk body: zstd: ") +
                              ZSTD_getErrorName(n));
    }
    if (n != stored_len) {
      return Status::DataLoss("corrupt chunk body: zstd produced " +
                              std::to_string(n) + " bytes, want " +
                              std::to_string(stored_len));
    }
    cur = dst;
  }

  // Undo the byte transform.
  if (h.transform != ByteTransform::kNone) {
    UndoTransform(h.transform, h.stored_dtype, cur, stored_len, stored);
    cur = stored;
  }

  // Undo the delta.
  if (h.xor_delta) {
    const uint8_t* base_stored = base.data();
    if (h.bf16_cast) {
      uint8_t* buf = scratch.Buffer(2, stored_len);
      CastToStored(base, buf);
      base_stored = buf;
    }
    XorBytes(cur, base_stored, stored_len, stored);
  } else if (cur != stored) {
    CopyBytes(stored, cur, stored_len);
  }

  if ((check_decoded || h.bf16_cast) &&
      Checksum64(ConstBytes(stored, stored_len)) != h.checksum) {
    return Status::DataLoss(
        "chunk checksum mismatch: decoded bytes differ "
        "from what was encoded");
  }
  if (h.bf16_cast) WidenFromStored(stored, out);
  return Status::OK();
}

}  // namespace

Status DecodeChunk(ConstBytes encoded, ConstBytes base, MutableBytes out) {
  return Decode(encoded, base, out, /*check_decoded=*/true);
}

Status DecodeChunkHashedByCaller(ConstBytes encoded, ConstBytes base,
                                 MutableBytes out) {
  return Decode(encoded, base, out, /*check_decoded=*/false);
}

}  // namespace hy::statestore
