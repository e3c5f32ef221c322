// A corrupt chunk must never decode to data: every damaged byte, every
// truncation and every inconsistent header is reported as an error.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codec_test_util.h"
#include "hy/common/hash.h"
#include "hy/statestore/codec.h"

namespace hy::statestore {
namespace {

using testing::StepF32;
using testing::WeightLikeBytes;

struct Sample {
  std::string name;
  std::string encoded;
  std::vector<uint8_t> base;
  size_t raw_length;
};

// Small chunks that between them exercise every decode path, in both
// chunk formats.
std::vector<Sample> Samples() {
  std::vector<Sample> out;
  const auto w0 = WeightLikeBytes(DType::kF32, 256, 1);
  const auto w1 = StepF32(w0, 1e-4f, 2);
  const auto noise = WeightLikeBytes(DType::kU8, 64, 3);
  // 127 bf16 values and a stray byte: a trailing partial element.
  const auto odd = WeightLikeBytes(DType::kBF16, 255, 4);
  auto add = [&](const std::string& name, const EncodeOptions& o, DType d,
                 const std::vector<uint8_t>& raw,
                 const std::vector<uint8_t>& base) {
    for (int format : {2, 1}) {
      EncodeOptions f = o;
      f.format_version = format;
      Sample s{name + " v" + std::to_string(format), "", base, raw.size()};
      EXPECT_TRUE(EncodeChunk(f, d, raw, base, &s.encoded).ok());
      out.push_back(std::move(s));
    }
  };
  EncodeOptions o;
  add("zstd+split", o, DType::kF32, w0, {});
  add("zstd+delta", o, DType::kF32, w1, w0);
  EncodeOptions cast;
  cast.cast_to_bf16 = true;
  add("cast+zstd+delta", cast, DType::kF32, w1, w0);
  add("cast+zstd", cast, DType::kF32, w0, {});
  add("plain", o, DType::kU8, noise, {});
  add("bf16 tail", o, DType::kBF16, odd, {});
  EncodeOptions nozstd;
  nozstd.zstd = false;
  nozstd.transform = 1;
  add("group-only", nozstd, DType::kF32, w0, {});
  add("delta-only", nozstd, DType::kF32, w1, w0);
  return out;
}

TEST(CodecCorruptionTest, EverySingleByteCorruptionIsDetected) {
  for (const Sample& s : Samples()) {
    SCOPED_TRACE(s.name);
    std::vector<uint8_t> out(s.raw_length);
    ASSERT_TRUE(DecodeChunk(s.encoded, s.base, MutableBytes(out)).ok());
    int detected = 0;
    for (size_t pos = 0; pos < s.encoded.size(); ++pos) {
      for (uint8_t mask : {0x01, 0x10, 0x80, 0xFF}) {
        std::string bad = s.encoded;
        bad[pos] = static_cast<char>(bad[pos] ^ mask);
        Status st = DecodeChunk(bad, s.base, MutableBytes(out));
        ASSERT_EQ(st.code(), StatusCode::kDataLoss)
            << "byte " << pos << " mask " << int{mask} << ": " << st;
        ++detected;
      }
    }
    EXPECT_EQ(detected, static_cast<int>(4 * s.encoded.size()));
  }
}

// The store's decode (the caller checks the output's content hash): the
// same bytes, and damage to the stored chunk is still caught before the
// decoder runs.
TEST(CodecCorruptionTest, DecodeHashedByCallerChecksTheInput) {
  for (const Sample& s : Samples()) {
    SCOPED_TRACE(s.name);
    std::vector<uint8_t> want(s.raw_length), out(s.raw_length);
    ASSERT_TRUE(DecodeChunk(s.encoded, s.base, MutableBytes(want)).ok());
    ASSERT_TRUE(
        DecodeChunkHashedByCaller(s.encoded, s.base, MutableBytes(out)).ok());
    EXPECT_EQ(out, want);
    for (size_t pos = 0; pos < s.encoded.size(); ++pos) {
      std::string bad = s.encoded;
      bad[pos] = static_cast<char>(bad[pos] ^ 0x10);
      Status st = DecodeChunkHashedByCaller(bad, s.base, MutableBytes(out));
      ASSERT_EQ(st.code(), StatusCode::kDataLoss)
          << "byte " << pos << ": " << st;
    }
  }
}

TEST(CodecCorruptionTest, EveryTruncationAndExtensionIsDetected) {
  for (const Sample& s : Samples()) {
    SCOPED_TRACE(s.name);
    std::vector<uint8_t> out(s.raw_length);
    for (size_t len = 0; len < s.encoded.size(); ++len) {
      Status st = DecodeChunk(ConstBytes(s.encoded).subspan(0, len), s.base,
                              MutableBytes(out));
      ASSERT_EQ(st.code(), StatusCode::kDataLoss) << len << ": " << st;
      if (len >= kChunkHeaderSize) {
        EXPECT_NE(st.message().find("truncated"), std::string_view::npos) << st;
      }
    }
    Status st = DecodeChunk(s.encoded + "x", s.base, MutableBytes(out));
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st;
  }
}

// Rewrites header byte `pos` to `value` and re-seals the header checksum, as
// a buggy or malicious writer would: only the semantic checks remain. The
// checksum sits where the format (byte 4 before the edit) puts it.
std::string Reseal(std::string enc, size_t pos, uint8_t value) {
  const size_t sealed =
      enc[4] == 2 ? ChunkHeaderSizeV2(static_cast<uint8_t>(enc[10])) - 8 : 64;
  enc[pos] = static_cast<char>(value);
  const uint64_t sum = Checksum64(
      ConstBytes(reinterpret_cast<const uint8_t*>(enc.data()), sealed));
  for (int i = 0; i < 8; ++i) {
    enc[sealed + i] = static_cast<char>(sum >> (8 * i));
  }
  return enc;
}

void ExpectEditsCaught(const Sample& s,
                       const std::vector<std::pair<size_t, uint8_t>>& edits) {
  for (auto [pos, value] : edits) {
    if (static_cast<uint8_t>(s.encoded[pos]) == value) continue;
    const std::string bad = Reseal(s.encoded, pos, value);
    std::vector<uint8_t> any(ParseChunkHeader(bad).ok()
                                 ? ParseChunkHeader(bad)->raw_length
                                 : s.raw_length);
    Status st = DecodeChunk(bad, {}, MutableBytes(any));
    EXPECT_FALSE(st.ok()) << "byte " << pos;
    EXPECT_TRUE(st.IsDataLoss() || st.IsInvalidArgument()) << st;
  }
}

TEST(CodecCorruptionTest, ResealedVersion2HeadersAreStillChecked) {
  const std::vector<Sample> samples = Samples();
  const Sample& s = samples[0];  // zstd + exponent split, f32, version 2.
  ASSERT_EQ(s.encoded[4], 2);
  std::vector<uint8_t> out(s.raw_length);
  Status st = DecodeChunk(Reseal(s.encoded, 4, 3), {}, MutableBytes(out));
  EXPECT_TRUE(st.IsDataLoss()) << st;  // Read as version 1: its checksum.
  ExpectEditsCaught(
      s, {
             {5, 0x00},   // zstd flag cleared
             {5, 0x08},   // unknown flag
             {6, 0x01},   // byte grouping instead of exponent split
             {6, 0x00},   // no transform: one group, not four
             {6, 0x03},   // unknown transform
             {7, 0x06},   // dtype i32
             {7, 0x63},   // unknown dtype
             {10, 0x03},  // group count
             {11, 0x01},  // reserved byte
             {16, 0x00},  // raw length changed
             {24, 0x00},  // body length changed
             {32, 0x00},  // address changed: the store's check
             {64, 0x00},  // group 0's length
             {71, 0x00},  // group 0's codec (zstd -> raw)
             {71, 0x02},  // unknown codec
             {72, 0x00},  // group 0's checksum
             {88, 0x00},  // group 1's checksum
         });
}

TEST(CodecCorruptionTest, ResealedHeadersAreStillChecked) {
  const std::vector<Sample> samples = Samples();
  const Sample& s = samples[1];  // zstd + exponent split, f32, version 1.
  ASSERT_EQ(s.encoded[4], 1);
  std::vector<uint8_t> out(s.raw_length);

  Status st = DecodeChunk(Reseal(s.encoded, 4, 3), {}, MutableBytes(out));
  EXPECT_TRUE(st.IsInvalidArgument()) << st;
  EXPECT_NE(st.message().find("unsupported chunk format version 3"),
            std::string_view::npos);

  // Another transform, dtype or flag with a valid header checksum: either a
  // consistency check or the content checksum must catch it.
  const std::vector<std::pair<size_t, uint8_t>> edits = {
      {5, 0x00},   // zstd flag cleared
      {5, 0x08},   // unknown flag
      {6, 0x01},   // byte grouping instead of exponent split
      {6, 0x00},   // no transform
      {6, 0x03},   // unknown transform
      {6, 0x07},   // unknown transform
      {7, 0x06},   // dtype i32
      {7, 0x63},   // unknown dtype
      {10, 0x01},  // reserved byte
      {16, 0x00},  // raw length changed
      {32, 0x00},  // content checksum changed
      {40, 0x00},  // body checksum changed
  };
  ExpectEditsCaught(s, edits);
}

TEST(CodecCorruptionTest, NotAChunkAtAll) {
  std::vector<uint8_t> out(16);
  Status st = DecodeChunk(std::string(100, 'z'), {}, MutableBytes(out));
  EXPECT_TRUE(st.IsDataLoss());
  EXPECT_NE(st.message().find("bad magic"), std::string_view::npos) << st;
  EXPECT_TRUE(ParseChunkHeader(ConstBytes()).status().IsDataLoss());
}

}  // namespace
}  // namespace hy::statestore
