// Internal to the codec: what its two formats' encoders and decoders share
// (codec.cc, codec_v2.cc): per-thread zstd contexts and buffers, the cast.

#ifndef HY_STATESTORE_CODEC_INTERNAL_H_
#define HY_STATESTORE_CODEC_INTERNAL_H_

// For ZSTD_c_literalCompressionMode; libzstd 1.5 implements it in its shared
// library too.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <memory>
#include <string>

#include "hy/statestore/codec.h"

namespace hy::statestore::internal {

// Per-thread zstd contexts and scratch buffers, reused across chunks so the
// steady state allocates nothing. A thread keeps up to four buffers of the
// largest chunk it has coded.
class ThreadScratch {
 public:
  ~ThreadScratch() {
    ZSTD_freeCCtx(cctx_);
    ZSTD_freeDCtx(dctx_);
  }

  // Returns a buffer of at least n bytes (never null). Contents unspecified.
  uint8_t* Buffer(int slot, size_t n) {
    if (cap_[slot] < n || !buf_[slot]) {
      buf_[slot].reset(new uint8_t[n == 0 ? 1 : n]);
      cap_[slot] = n;
    }
    return buf_[slot].get();
  }
  ZSTD_CCtx* cctx() {
    if (cctx_ == nullptr) cctx_ = ZSTD_createCCtx();
    return cctx_;
  }
  // Sets cctx()'s parameters for the next ZSTD_compress2: `level`, and with
  // `acceleration` > 0 the fast strategy stepping that far between match
  // searches, its literals always Huffman-coded. Returns Internal if zstd
  // refuses a parameter.
  Status SetUp(int level, int acceleration) {
    if (level == level_ && acceleration == acceleration_) return Status::OK();
    ZSTD_CCtx* c = cctx();
    size_t r = ZSTD_CCtx_reset(c, ZSTD_reset_parameters);
    if (!ZSTD_isError(r)) {
      r = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
    }
    if (!ZSTD_isError(r) && acceleration > 0) {
      r = ZSTD_CCtx_setParameter(c, ZSTD_c_strategy, ZSTD_fast);
      if (!ZSTD_isError(r)) {
        r = ZSTD_CCtx_setParameter(c, ZSTD_c_targetLength, acceleration);
      }
      if (!ZSTD_isError(r)) {
        r = ZSTD_CCtx_setParameter(c, ZSTD_c_literalCompressionMode,
                                   ZSTD_ps_enable);
      }
    }
    if (ZSTD_isError(r)) {
      level_ = acceleration_ = -1000;
      return Status::Internal(std::string("zstd parameters: ") +
                              ZSTD_getErrorName(r));
    }
    level_ = level;
    acceleration_ = acceleration;
    return Status::OK();
  }
  ZSTD_DCtx* dctx() {
    if (dctx_ == nullptr) dctx_ = ZSTD_createDCtx();
    return dctx_;
  }

 private:
  std::unique_ptr<uint8_t[]> buf_[4];
  size_t cap_[4] = {0, 0, 0, 0};
  ZSTD_CCtx* cctx_ = nullptr;
  ZSTD_DCtx* dctx_ = nullptr;
  int level_ = -1000;  // What SetUp last set; -1000: nothing yet.
  int acceleration_ = -1000;
};

// The fast strategy's step between match searches for float planes: large
// enough that zstd finds no matches and only Huffman-codes the bytes.
constexpr int kNoMatchSearch = 16384;

ThreadScratch& Scratch();

// Casts raw f32 bytes to stored bf16 bytes; a trailing partial element is
// copied verbatim. `out` has StoredLengthFor(true, raw.size()) bytes.
void CastToStored(ConstBytes raw, uint8_t* out);

// Version 2's stage 4 and header: cuts `work` (the transformed stored bytes,
// stored_len of them) into h's byte groups, compresses each that pays, and
// writes header and groups to *out. `stored` is the untransformed stored
// bytes, for the fall back to a plain chunk when no group compresses.
// REQUIRES: h has every field but the groups, lengths and zstd set.
Status EncodeGroupsV2(const EncodeOptions& options, ChunkHeader* h,
                      const uint8_t* work, const uint8_t* stored,
                      std::string* out);

// Version 2's decoder. REQUIRES: h is `encoded`'s parsed header; out has
// h.raw_length bytes; base is checked against h.base_hash when h.xor_delta.
Status DecodeV2(const ChunkHeader& h, ConstBytes encoded, ConstBytes base,
                MutableBytes out);

}  // namespace hy::statestore::internal

#endif  // HY_STATESTORE_CODEC_INTERNAL_H_
