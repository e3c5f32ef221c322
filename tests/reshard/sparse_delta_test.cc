// Sparse delta without gathering (internal to the executor): the fused
// cast-and-compare finds exactly the changed bf16 values, whatever the
// bits (NaN payloads, infinities, denormals, rounding ties), the sender's
// copy (whatever form goes) and the receiver's destination end up equal
// to the plain cast, and damage or a wrong previous copy is DataLoss.

#include "sparse_delta.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "hy/common/bf16.h"
#include "hy/common/hash.h"
#include "pairs.h"

namespace hy::reshard::internal {
namespace {

// One f32 tensor of n elements; a list of transfers over it.
struct OneTensor {
  ModelSpec spec;
  PeerList list;
  explicit OneTensor(int64_t n) {
    TensorSpec t;
    t.meta.name = "w";
    t.meta.dtype = DType::kF32;
    t.meta.shape = {n};
    spec.tensors.push_back(t);
  }
  void Add(int64_t src_offset, int64_t dst_offset, int64_t length) {
    list.transfers.push_back({0, 0, 1, src_offset, dst_offset, length});
    Describe(spec, WireFormat::kBf16, &list);
  }
};

std::vector<uint8_t> Cast(const std::vector<uint32_t>& f32) {
  std::vector<uint8_t> out(f32.size() * 2);
  for (size_t i = 0; i < f32.size(); ++i) {
    const uint16_t b = F32BitsToBf16Bits(f32[i]);
    std::memcpy(out.data() + i * 2, &b, 2);
  }
  return out;
}

// The bucket's elements in order, cast: what the full form would carry.
std::vector<uint8_t> FullBucket(const PeerList& list,
                                const std::vector<uint8_t>& cast) {
  std::vector<uint8_t> out;
  for (const Transfer& t : list.transfers) {
    out.insert(out.end(), cast.begin() + t.src_offset * 2,
               cast.begin() + (t.src_offset + t.length) * 2);
  }
  return out;
}

// Bits that stress the cast: NaNs with payload only in the dropped half,
// infinities, the largest finite values, denormals, ties to even.
uint32_t Special(std::mt19937_64& rng) {
  static const uint32_t kBits[] = {
      0x7F800001u, 0xFF800001u, 0x7FC00000u, 0xFFFFFFFFu, 0x7F800000u,
      0xFF800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x00000001u, 0x80008000u,
      0x3F808000u, 0x3F818000u, 0x00000000u, 0x80000000u, 0x3F807FFFu};
  return kBits[rng() % (sizeof(kBits) / sizeof(kBits[0]))];
}

TEST(SparseDeltaTest, FindsExactlyTheChangedValuesOfAnyBits) {
  const int64_t n = 10007;  // Not a multiple of any vector width.
  OneTensor s(n);
  s.Add(5000, 0, 5007);  // Out of order, uneven lengths.
  s.Add(0, 5007, 4999);
  s.Add(4999, 10006, 1);
  std::mt19937_64 rng(3);
  std::vector<uint32_t> before(n), after(n);
  for (int64_t i = 0; i < n; ++i) before[i] = after[i] = Special(rng);
  for (int64_t i = 0; i < n; ++i) {
    if (rng() % 20 == 0)
      after[i] = (rng() % 2) ? Special(rng) : static_cast<uint32_t>(rng());
  }
  // The sender's copy as last sent, in bucket order.
  std::vector<uint8_t> last = FullBucket(s.list, Cast(before));
  const std::vector<uint8_t> want = FullBucket(s.list, Cast(after));
  int64_t expected_changes = 0;
  for (int64_t i = 0; i < n; ++i) {
    expected_changes += std::memcmp(&last[i * 2], &want[i * 2], 2) != 0;
  }
  ASSERT_GT(expected_changes, 100);

  std::vector<ConstBytes> src{ConstBytes(
      reinterpret_cast<const uint8_t*>(after.data()), after.size() * 4)};
  SparseScratch scratch;
  WireBuffer bucket;
  int64_t changed = 0;
  ASSERT_EQ(EncodeSparse(s.spec, WireFormat::kBf16, s.list, src,
                         MutableBytes(last), &scratch, &bucket, &changed),
            SparseOutcome::kEncoded);
  EXPECT_EQ(changed, expected_changes);
  ASSERT_EQ(bucket[0], static_cast<uint8_t>(BucketKind::kPairs));
  uint64_t checksum;
  std::memcpy(&checksum, bucket.data() + 1, 8);
  EXPECT_EQ(checksum, Checksum64(ConstBytes(want)));
  // The sender's copy is the new full bucket now.
  EXPECT_EQ(last, want);

  // The receiver holds the old values at dst_offset (here in bucket order
  // too); applying gives the new.
  std::vector<uint8_t> dst = FullBucket(s.list, Cast(before));
  std::vector<MutableBytes> dst_view{MutableBytes(dst)};
  ASSERT_TRUE(
      ApplySparse(s.list, ConstBytes(bucket.data(), bucket.size()), dst_view)
          .ok());
  EXPECT_EQ(dst, want);

  // Nothing changed now: one checksum goes, and it checks the receiver.
  changed = 0;
  ASSERT_EQ(EncodeSparse(s.spec, WireFormat::kBf16, s.list, src,
                         MutableBytes(last), &scratch, &bucket, &changed),
            SparseOutcome::kEncoded);
  EXPECT_EQ(changed, 0);
  EXPECT_EQ(bucket.size(), 9u);
  EXPECT_EQ(last, want);
  EXPECT_TRUE(
      ApplySparse(s.list, ConstBytes(bucket.data(), bucket.size()), dst_view)
          .ok());
  dst[7] ^= 1;
  Status bad =
      ApplySparse(s.list, ConstBytes(bucket.data(), bucket.size()), dst_view);
  EXPECT_TRUE(bad.IsDataLoss()) << bad;
}

// Every pattern of changed lanes within eight (the vector scan packs the
// changes of each eight lanes through a table of all 256): the pairs hold
// exactly the changed positions, in order, with their new values.
TEST(SparseDeltaTest, EveryPatternOfChangedLanesIsRecordedInOrder) {
  // Each mask in a vector of 16 lanes (low half: block, high half: its
  // complement), then 48 unchanged lanes: sparse enough for pairs; the 5
  // lanes past the vectors all change.
  const int64_t n = 256 * 64 + 5;
  OneTensor s(n);
  s.Add(0, 0, n);
  std::vector<uint32_t> before(n), after(n);
  for (int64_t i = 0; i < n; ++i) {
    before[i] = after[i] = 0x3F800000u + (static_cast<uint32_t>(i) << 16);
  }
  std::vector<uint32_t> want_index;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t block = i / 64, lane = i % 64;
    const int64_t mask = lane < 8 ? block : 255 - block;
    if (block < 256 && (lane >= 16 || ((mask >> (lane % 8)) & 1) == 0)) {
      continue;
    }
    after[i] += 0x10000u;  // Changes the bf16 value.
    want_index.push_back(static_cast<uint32_t>(i));
  }
  std::vector<uint8_t> last = FullBucket(s.list, Cast(before));
  const std::vector<uint8_t> want = FullBucket(s.list, Cast(after));
  std::vector<ConstBytes> src{ConstBytes(
      reinterpret_cast<const uint8_t*>(after.data()), after.size() * 4)};
  SparseScratch scratch;
  WireBuffer bucket;
  int64_t changed = 0;
  ASSERT_EQ(EncodeSparse(s.spec, WireFormat::kBf16, s.list, src,
                         MutableBytes(last), &scratch, &bucket, &changed),
            SparseOutcome::kEncoded);
  ASSERT_EQ(bucket[0], static_cast<uint8_t>(BucketKind::kPairs));
  PairsView pairs;
  ASSERT_TRUE(
      ParsePairs(ConstBytes(bucket.data(), bucket.size()), 2, n, &pairs).ok());
  ASSERT_EQ(pairs.count, want_index.size());
  std::vector<uint32_t> index;
  for (uint64_t i = 0; pairs.gaps.Next(&i);) {
    index.push_back(static_cast<uint32_t>(i));
  }
  EXPECT_TRUE(pairs.gaps.AtEnd());
  EXPECT_EQ(index, want_index);
  for (uint64_t k = 0; k < pairs.count; ++k) {
    ASSERT_EQ(0, std::memcmp(pairs.values + k * 2, &want[want_index[k] * 2], 2))
        << k;
  }
  EXPECT_EQ(last, want);
}

TEST(SparseDeltaTest, DenseBucketsGoWholeAndSparseOnesDoNot) {
  const int64_t n = 1 << 20;
  OneTensor s(n);
  s.Add(0, 0, n);
  std::mt19937_64 rng(4);
  std::vector<uint32_t> f(n);
  for (auto& x : f) x = 0x3F800000u + static_cast<uint32_t>(rng() % 0x7FFFFF);
  std::vector<uint8_t> last = Cast(f);
  std::vector<ConstBytes> src{
      ConstBytes(reinterpret_cast<const uint8_t*>(f.data()), f.size() * 4)};
  SparseScratch scratch;
  WireBuffer bucket;
  // Half the values change: the sample sees it and nothing is recorded;
  // the sender's copy still becomes the full new bucket.
  for (int64_t i = 0; i < n; i += 2) f[i] += 0x10000u;
  int64_t changed = 0;
  EXPECT_EQ(EncodeSparse(s.spec, WireFormat::kBf16, s.list, src,
                         MutableBytes(last), &scratch, &bucket, &changed),
            SparseOutcome::kTooDense);
  EXPECT_NEAR(static_cast<double>(changed), n / 2.0, n / 20.0);
  EXPECT_EQ(last, Cast(f));
  EXPECT_TRUE(bucket.empty());  // Untouched.
  // 36% at random: the sample says pairs may win (under 1.25x the
  // break-even of a third), the scan finds they do not near the end.
  for (int64_t i = 0; i < n; ++i) {
    if (rng() % 100 < 36) f[i] += 0x10000u;
  }
  changed = 0;
  EXPECT_EQ(EncodeSparse(s.spec, WireFormat::kBf16, s.list, src,
                         MutableBytes(last), &scratch, &bucket, &changed),
            SparseOutcome::kTooDense);
  EXPECT_GT(changed, n / 4);
  EXPECT_EQ(last, Cast(f));
  // A fifth: pairs (3 bytes each: the value and a one-byte gap) beat 2
  // bytes per element. (From
  // exact bf16 values: one ulp more of a tie can round to the same bf16.)
  for (int64_t i = 0; i < n; ++i) {
    uint16_t b;
    std::memcpy(&b, &last[i * 2], 2);
    f[i] = Bf16BitsToF32Bits(b) + ((i % 5 == 0) ? 0x10000u : 0u);
  }
  changed = 0;
  ASSERT_EQ(EncodeSparse(s.spec, WireFormat::kBf16, s.list, src,
                         MutableBytes(last), &scratch, &bucket, &changed),
            SparseOutcome::kEncoded);
  EXPECT_EQ(changed, (n + 4) / 5);
  EXPECT_EQ(bucket.size(), 17u + static_cast<size_t>(changed) * 3);
  EXPECT_EQ(last, Cast(f));
}

// A kPairs bucket of `count` changes (checksum 0) with `body` after the
// header.
std::vector<uint8_t> Pairs(uint64_t count, std::vector<uint8_t> body) {
  std::vector<uint8_t> b(17 + body.size(), 0);
  b[0] = static_cast<uint8_t>(BucketKind::kPairs);
  std::memcpy(&b[9], &count, 8);
  std::copy(body.begin(), body.end(), b.begin() + 17);
  return b;
}

TEST(SparseDeltaTest, DamagedBucketsAreDataLoss) {
  OneTensor s(64);
  s.Add(0, 0, 64);
  std::vector<uint8_t> dst(128, 0);
  std::vector<MutableBytes> view{MutableBytes(dst)};
  auto apply = [&](const std::vector<uint8_t>& b) {
    return ApplySparse(s.list, ConstBytes(b), view);
  };
  EXPECT_TRUE(apply({}).IsDataLoss());
  EXPECT_TRUE(
      apply({static_cast<uint8_t>(BucketKind::kPairs), 1, 2}).IsDataLoss());
  // One pair whose index is past the bucket: value 0x0101, gap 65.
  const std::vector<uint8_t> beyond = Pairs(1, {1, 1, 65});
  Status s1 = apply(beyond);
  EXPECT_TRUE(s1.IsDataLoss()) << s1;
  EXPECT_NE(s1.message().find("out of range"), std::string::npos) << s1;
  Status wrong = apply(Pairs(1, {1, 1, 64}));  // In range; checksum 0.
  EXPECT_NE(wrong.message().find("checksum mismatch"), std::string::npos)
      << wrong;
  // Gaps that are not one gap: a byte too many, a truncated escape, a
  // zero escape, and too few bytes for the count.
  for (const std::vector<uint8_t>& bad :
       {Pairs(1, {1, 1, 3, 4}), Pairs(1, {1, 1, 0, 0, 1}),
        Pairs(1, {1, 1, 0, 0, 0, 0, 0}), Pairs(2, {1, 1, 2, 2, 3})}) {
    Status s2 = apply(bad);
    EXPECT_TRUE(s2.IsDataLoss()) << s2;
  }
  // A full bucket is not this function's to apply.
  EXPECT_TRUE(
      apply({static_cast<uint8_t>(BucketKind::kFull), 0, 0, 0, 0, 0, 0, 0, 0})
          .IsDataLoss());
}

}  // namespace
}  // namespace hy::reshard::internal
