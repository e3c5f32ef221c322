#include "hy/statestore/codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codec_test_util.h"
#include "hy/common/bf16.h"

namespace hy::statestore {
namespace {

using testing::CastBuffer;
using testing::StepF32;
using testing::WeightLikeBytes;

// What decoding must return for `raw`: raw itself, or for a bf16 cast the
// values rounded to bf16 and widened back, with a partial tail verbatim.
std::vector<uint8_t> Expected(const std::vector<uint8_t>& raw, bool cast) {
  if (!cast) return raw;
  std::vector<uint8_t> out(raw.size());
  const size_t n = raw.size() / 4;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, raw.data() + 4 * i, 4);
    const uint32_t w = Bf16BitsToF32Bits(F32BitsToBf16Bits(bits));
    std::memcpy(out.data() + 4 * i, &w, 4);
  }
  std::memcpy(out.data() + 4 * n, raw.data() + 4 * n, raw.size() - 4 * n);
  return out;
}

class CodecRoundTripTest : public ::testing::TestWithParam<DType> {};

TEST_P(CodecRoundTripTest, EveryStageCombinationAndLength) {
  const DType dtype = GetParam();
  const size_t es = DTypeSize(dtype);
  const size_t lengths[] = {0, 1, es - 1, es + 1, 64 * es, 4099, 65536 + 3};
  const int transforms[] = {kAutoTransform, 0, 1, 2};
  int cases = 0;
  for (size_t len : lengths) {
    const auto raw = WeightLikeBytes(dtype, len, static_cast<uint32_t>(len));
    const auto base =
        WeightLikeBytes(dtype, len, static_cast<uint32_t>(len + 1));
    for (bool cast : {false, true}) {
      for (bool delta : {false, true}) {
        for (int transform : transforms) {
          for (bool zstd : {false, true}) {
            EncodeOptions o;
            o.cast_to_bf16 = cast;
            o.transform = transform;
            o.zstd = zstd;
            SCOPED_TRACE(::testing::Message()
                         << "len=" << len << " cast=" << cast
                         << " delta=" << delta << " transform=" << transform
                         << " zstd=" << zstd);
            std::string enc;
            ConstBytes b = delta ? ConstBytes(base) : ConstBytes();
            ASSERT_TRUE(EncodeChunk(o, dtype, raw, b, &enc).ok());
            ASSERT_LE(enc.size(), MaxEncodedLength(len));
            Result<ChunkHeader> h = ParseChunkHeader(enc);
            ASSERT_TRUE(h.ok()) << h.status();
            const bool did_cast = cast && dtype == DType::kF32;
            EXPECT_EQ(h->dtype, dtype);
            EXPECT_EQ(h->bf16_cast, did_cast);
            EXPECT_EQ(h->raw_length, len);
            EXPECT_EQ(h->EncodedLength(), enc.size());
            if (!zstd) {
              // Without zstd nothing falls back: the stages asked for run.
              EXPECT_EQ(h->xor_delta, delta && len > 0);
            }
            std::vector<uint8_t> out(len, 0xAB);
            Status s = DecodeChunk(enc, b, MutableBytes(out));
            ASSERT_TRUE(s.ok()) << s << " " << h->DebugString();
            ASSERT_EQ(out, Expected(raw, did_cast));
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 7 * 2 * 2 * 4 * 2);
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, CodecRoundTripTest,
                         ::testing::ValuesIn(kAllDTypes), [](const auto& info) {
                           return std::string(SafetensorsName(info.param));
                         });

double Ratio(const std::vector<uint8_t>& raw, const std::string& enc) {
  return static_cast<double>(raw.size()) / static_cast<double>(enc.size());
}

TEST(CodecTest, CompressesGaussianWeights) {
  const size_t n = 1 << 20;
  EncodeOptions o;
  std::string enc;
  const auto f32 = WeightLikeBytes(DType::kF32, n, 1);
  ASSERT_TRUE(EncodeChunk(o, DType::kF32, f32, {}, &enc).ok());
  EXPECT_GE(Ratio(f32, enc), 1.15);
  EXPECT_EQ(ParseChunkHeader(enc)->transform, ByteTransform::kExponentSplit);
  const auto bf16 = WeightLikeBytes(DType::kBF16, n, 2);
  ASSERT_TRUE(EncodeChunk(o, DType::kBF16, bf16, {}, &enc).ok());
  EXPECT_GE(Ratio(bf16, enc), 1.38);
  // Plain zstd on the raw bytes does clearly worse: the transform matters.
  o.transform = 0;
  ASSERT_TRUE(EncodeChunk(o, DType::kBF16, bf16, {}, &enc).ok());
  EXPECT_LT(Ratio(bf16, enc), 1.30);
}

TEST(CodecTest, FloatsAreEntropyCodedOnlyAndDeltasStillSearchMatches) {
  const auto w0 = WeightLikeBytes(DType::kF32, 1 << 20, 11);
  const auto w1 = StepF32(w0, 1e-6f, 12);
  const auto b0 = CastBuffer(w0);
  const auto b1 = CastBuffer(w1);
  EncodeOptions matched;
  matched.float_entropy_only = false;
  EncodeOptions delta_split;
  delta_split.transform = static_cast<int>(ByteTransform::kExponentSplit);
  // One thread, so one zstd context switches between the two settings: a
  // delta encoded after a float must come out as it did before it.
  std::string d_before, d_after, d_matched;
  ASSERT_TRUE(EncodeChunk(delta_split, DType::kBF16, b1, b0, &d_before).ok());
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(SafetensorsName(dtype));
    const auto& raw = dtype == DType::kF32 ? w1 : b1;
    std::string entropy, full;
    ASSERT_TRUE(EncodeChunk({}, dtype, raw, {}, &entropy).ok());
    ASSERT_TRUE(EncodeChunk(matched, dtype, raw, {}, &full).ok());
    EXPECT_NE(entropy, full);
    EXPECT_TRUE(ParseChunkHeader(entropy)->zstd);
    // Float planes hold no matches worth finding: entropy coding alone is
    // at least as small.
    EXPECT_LE(entropy.size(), full.size());
    std::vector<uint8_t> out(raw.size());
    ASSERT_TRUE(DecodeChunk(entropy, {}, MutableBytes(out)).ok());
    EXPECT_EQ(out, raw);
  }
  ASSERT_TRUE(EncodeChunk(delta_split, DType::kBF16, b1, b0, &d_after).ok());
  EXPECT_EQ(d_after, d_before);
  delta_split.float_entropy_only = false;
  ASSERT_TRUE(EncodeChunk(delta_split, DType::kBF16, b1, b0, &d_matched).ok());
  EXPECT_EQ(d_after, d_matched);  // A delta never goes entropy-only.
  EXPECT_GE(Ratio(b1, d_after), 15.0);
}

TEST(CodecTest, Bf16DeltaAfterSmallStepIsTiny) {
  const auto w0 = WeightLikeBytes(DType::kF32, 1 << 20, 3);
  // An RL-sized step (1e-6 per element): most bf16 values keep their bits.
  const auto w1 = StepF32(w0, 1e-6f, 4);
  const auto b0 = CastBuffer(w0);
  const auto b1 = CastBuffer(w1);
  std::string full, delta;
  ASSERT_TRUE(EncodeChunk({}, DType::kBF16, b1, {}, &full).ok());
  ASSERT_TRUE(EncodeChunk({}, DType::kBF16, b1, b0, &delta).ok());
  EXPECT_TRUE(ParseChunkHeader(delta)->xor_delta);
  EXPECT_EQ(ParseChunkHeader(delta)->transform, ByteTransform::kByteGroup);
  EXPECT_GE(Ratio(b1, delta), 15.0);
  EXPECT_LT(delta.size() * 5, full.size());
  std::vector<uint8_t> out(b1.size());
  ASSERT_TRUE(DecodeChunk(delta, b0, MutableBytes(out)).ok());
  EXPECT_EQ(out, b1);
}

TEST(CodecTest, CastPlusDeltaUsesTheCastBase) {
  // f32 master weights saved as bf16 snapshots, delta against the previous
  // f32 version: decoding needs that same f32 base.
  const auto w0 = WeightLikeBytes(DType::kF32, 1 << 16, 5);
  const auto w1 = StepF32(w0, 1e-6f, 6);
  EncodeOptions o;
  o.cast_to_bf16 = true;
  std::string enc;
  ASSERT_TRUE(EncodeChunk(o, DType::kF32, w1, w0, &enc).ok());
  const ChunkHeader h = *ParseChunkHeader(enc);
  EXPECT_TRUE(h.bf16_cast && h.xor_delta && h.zstd);
  EXPECT_EQ(h.stored_dtype, DType::kBF16);
  EXPECT_GE(Ratio(w1, enc), 30.0);  // 2x from the cast, the rest from delta.
  std::vector<uint8_t> out(w1.size());
  ASSERT_TRUE(DecodeChunk(enc, w0, MutableBytes(out)).ok());
  EXPECT_EQ(out, Expected(w1, true));
}

TEST(CodecTest, IncompressibleDataIsStoredPlainWithoutBase) {
  const auto noise = WeightLikeBytes(DType::kU8, 100000, 7);
  const auto base = WeightLikeBytes(DType::kU8, 100000, 8);
  std::string enc;
  ASSERT_TRUE(EncodeChunk({}, DType::kU8, noise, base, &enc).ok());
  const ChunkHeader h = *ParseChunkHeader(enc);
  EXPECT_FALSE(h.zstd);
  EXPECT_FALSE(h.xor_delta);  // No longer depends on the base.
  EXPECT_EQ(h.transform, ByteTransform::kNone);
  EXPECT_EQ(h.body_length, noise.size());
  std::vector<uint8_t> out(noise.size());
  ASSERT_TRUE(DecodeChunk(enc, {}, MutableBytes(out)).ok());
  EXPECT_EQ(out, noise);
}

TEST(CodecTest, DeltaNeedsItsExactBase) {
  const auto w0 = WeightLikeBytes(DType::kBF16, 8192, 9);
  auto w1 = w0;
  w1[100] ^= 1;
  std::string enc;
  ASSERT_TRUE(EncodeChunk({}, DType::kBF16, w1, w0, &enc).ok());
  ASSERT_TRUE(ParseChunkHeader(enc)->xor_delta);
  std::vector<uint8_t> out(w1.size());
  Status s = DecodeChunk(enc, {}, MutableBytes(out));
  EXPECT_TRUE(s.IsInvalidArgument()) << s;
  EXPECT_NE(s.message().find("needs its base"), std::string_view::npos);
  auto wrong = w0;
  wrong[5] ^= 0x10;
  s = DecodeChunk(enc, wrong, MutableBytes(out));
  EXPECT_TRUE(s.IsInvalidArgument()) << s;
  EXPECT_NE(s.message().find("wrong delta base"), std::string_view::npos);
  s = DecodeChunk(enc, ConstBytes(w0).subspan(0, 100), MutableBytes(out));
  EXPECT_TRUE(s.IsInvalidArgument()) << s;
  ASSERT_TRUE(DecodeChunk(enc, w0, MutableBytes(out)).ok());
  EXPECT_EQ(out, w1);
}

TEST(CodecTest, KnownBaseHashSkipsHashingButMustBeRight) {
  const auto w0 = WeightLikeBytes(DType::kBF16, 4096, 10);
  const auto w1 = WeightLikeBytes(DType::kBF16, 4096, 11);
  const Hash128 right = ContentHash(w0);
  EncodeOptions o;
  o.zstd = false;  // Keep the delta whatever its ratio.
  o.base_hash = &right;
  std::string a, b;
  ASSERT_TRUE(EncodeChunk(o, DType::kBF16, w1, w0, &a).ok());
  o.base_hash = nullptr;
  ASSERT_TRUE(EncodeChunk(o, DType::kBF16, w1, w0, &b).ok());
  EXPECT_EQ(a, b);
  const Hash128 bogus{1, 2};
  o.base_hash = &bogus;
  ASSERT_TRUE(EncodeChunk(o, DType::kBF16, w1, w0, &a).ok());
  std::vector<uint8_t> out(w1.size());
  EXPECT_TRUE(DecodeChunk(a, w0, MutableBytes(out)).IsInvalidArgument());
}

TEST(CodecTest, RejectsBadArguments) {
  const auto raw = WeightLikeBytes(DType::kF32, 64, 12);
  std::string enc;
  EXPECT_TRUE(EncodeChunk({}, static_cast<DType>(77), raw, {}, &enc)
                  .IsInvalidArgument());
  EXPECT_TRUE(
      EncodeChunk({}, DType::kF32, raw, ConstBytes(raw).subspan(1), &enc)
          .IsInvalidArgument());
  EncodeOptions o;
  o.transform = 3;
  EXPECT_TRUE(EncodeChunk(o, DType::kF32, raw, {}, &enc).IsInvalidArgument());
  o = EncodeOptions();
  o.zstd_level = 1000;
  EXPECT_TRUE(EncodeChunk(o, DType::kF32, raw, {}, &enc).IsInvalidArgument());
  o = EncodeOptions();
  o.min_compression_ratio = 0.5;
  EXPECT_TRUE(EncodeChunk(o, DType::kF32, raw, {}, &enc).IsInvalidArgument());

  ASSERT_TRUE(EncodeChunk({}, DType::kF32, raw, {}, &enc).ok());
  std::vector<uint8_t> small(raw.size() - 1);
  EXPECT_TRUE(DecodeChunk(enc, {}, MutableBytes(small)).IsInvalidArgument());
}

TEST(CodecTest, HeaderDebugStringNamesTheStages) {
  const auto w = WeightLikeBytes(DType::kF32, 4096, 13);
  EncodeOptions o;
  o.cast_to_bf16 = true;
  std::string enc;
  ASSERT_TRUE(EncodeChunk(o, DType::kF32, w, {}, &enc).ok());
  const std::string d = ParseChunkHeader(enc)->DebugString();
  EXPECT_NE(d.find("dtype=F32"), std::string::npos) << d;
  EXPECT_NE(d.find("stored=BF16"), std::string::npos) << d;
  EXPECT_NE(d.find("cast"), std::string::npos) << d;
  EXPECT_NE(d.find("raw=4096"), std::string::npos) << d;
  // Format 2, exponent split bf16: exponents compress, mantissas do not.
  EXPECT_NE(d.find("v2 "), std::string::npos) << d;
  EXPECT_NE(d.find("groups=zr"), std::string::npos) << d;
}

// Per group, zstd only where it pays: a split f32 weight keeps its
// exponent plane compressed and its low mantissa planes raw, and the ratio
// is format 1's within 2%.
TEST(CodecTest, Format2CompressesOnlyTheGroupsThatPay) {
  const auto w = WeightLikeBytes(DType::kF32, 1 << 18, 14);
  EncodeOptions o;
  std::string v2, v1;
  ASSERT_TRUE(EncodeChunk(o, DType::kF32, w, {}, &v2).ok());
  o.format_version = 1;
  ASSERT_TRUE(EncodeChunk(o, DType::kF32, w, {}, &v1).ok());
  const ChunkHeader h = *ParseChunkHeader(v2);
  ASSERT_EQ(h.group_count, 4);
  EXPECT_EQ(h.groups[0].codec, GroupCodec::kZstd);
  EXPECT_EQ(h.groups[1].codec, GroupCodec::kRaw);
  EXPECT_EQ(h.groups[2].codec, GroupCodec::kRaw);
  EXPECT_LT(h.groups[0].length, (w.size() / 4) / 2);
  EXPECT_LT(static_cast<double>(v2.size()), v1.size() * 1.02);
  std::vector<uint8_t> out(w.size());
  ASSERT_TRUE(DecodeChunk(v2, {}, MutableBytes(out)).ok());
  EXPECT_EQ(out, w);
}

// A long group is tried on a sample before zstd reads all of it: the
// sample must still find what compresses, wherever it lies (here the low
// mantissa bytes of the last 30% of a 4 MiB chunk are zero).
TEST(CodecTest, Format2SamplesLongGroupsWithoutMissingWhatCompresses) {
  const size_t n = size_t{1} << 20;  // f32 elements: 1 MiB planes.
  auto w = WeightLikeBytes(DType::kF32, 4 * n, 15);
  // All zero low bytes in planes 1 and 2 from element 85% on.
  for (size_t i = n * 85 / 100; i < n; ++i) w[4 * i] = w[4 * i + 1] = 0;
  EncodeOptions o;
  std::string v;
  ASSERT_TRUE(EncodeChunk(o, DType::kF32, w, {}, &v).ok());
  ChunkHeader h = *ParseChunkHeader(v);
  ASSERT_EQ(h.group_count, 4);
  EXPECT_EQ(h.groups[0].codec, GroupCodec::kZstd);
  EXPECT_EQ(h.groups[1].codec, GroupCodec::kZstd);
  EXPECT_EQ(h.groups[2].codec, GroupCodec::kZstd);
  EXPECT_EQ(h.groups[3].codec, GroupCodec::kRaw);
  EXPECT_LT(h.groups[1].length, n * 9 / 10);
  std::vector<uint8_t> out(w.size());
  ASSERT_TRUE(DecodeChunk(v, {}, MutableBytes(out)).ok());
  EXPECT_EQ(out, w);

  // Random low bytes throughout: the sample says raw, and so would zstd.
  w = WeightLikeBytes(DType::kF32, 4 * n, 16);
  ASSERT_TRUE(EncodeChunk(o, DType::kF32, w, {}, &v).ok());
  h = *ParseChunkHeader(v);
  EXPECT_EQ(h.groups[1].codec, GroupCodec::kRaw);
  EXPECT_EQ(h.groups[1].length, n);
  ASSERT_TRUE(DecodeChunk(v, {}, MutableBytes(out)).ok());
  EXPECT_EQ(out, w);
}

}  // namespace
}  // namespace hy::statestore
