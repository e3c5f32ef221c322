// The bucket wire format (internal to the executor): every delta form
// decodes to the same bytes as the full form, and damage is DataLoss.

#include "wire.h"

#include <gtest/gtest.h>

#include <random>

namespace hy::reshard::internal {
namespace {

WireBuffer Full(const std::vector<uint8_t>& now) {
  WireBuffer b(1 + now.size());
  b[0] = static_cast<uint8_t>(BucketKind::kFull);
  std::copy(now.begin(), now.end(), b.begin() + 1);
  return b;
}

struct Encoded {
  WireBuffer wire;
  int64_t changed = 0;
};

// A link slow enough (10 MB/s) that the bytes decide, as before a cost
// model: the smallest form wins.
DeltaCost SlowLink() {
  DeltaCost c;
  c.link_bytes_per_second = 10e6;
  return c;
}

Encoded Encode(const std::vector<uint8_t>& before,
               const std::vector<uint8_t>& now,
               const DeltaCost& cost = SlowLink()) {
  Encoded e;
  Status s = EncodeDelta(DType::kBF16, 2, ConstBytes(before), ConstBytes(now),
                         &e.wire, &e.changed, cost);
  EXPECT_TRUE(s.ok()) << s;
  if (e.wire.empty()) e.wire = Full(now);  // The full form was cheapest.
  return e;
}

template <typename Wire>
std::vector<uint8_t> Decode(const Wire& wire,
                            const std::vector<uint8_t>& before,
                            Status* status) {
  std::vector<uint8_t> now(before.size(), 0xCC);
  bool unchanged = false;
  *status = DecodeBucket(ConstBytes(wire.data(), wire.size()), DType::kBF16, 2,
                         ConstBytes(before), MutableBytes(now), &unchanged);
  return unchanged ? before : now;
}

TEST(WireTest, EachFormRoundTripsAndIsChosenBySize) {
  std::mt19937_64 rng(3);
  std::vector<uint8_t> before(1 << 16);
  for (auto& b : before) b = static_cast<uint8_t>(rng() & 0x3F);
  struct Case {
    double fraction;
    BucketKind kind;
  } cases[] = {{0, BucketKind::kUnchanged},
               {0.01, BucketKind::kPairs},
               {0.5, BucketKind::kXorChunk},
               {1.0, BucketKind::kFull}};
  for (const Case& c : cases) {
    std::vector<uint8_t> now = before;
    std::uniform_real_distribution<double> u(0, 1);
    for (size_t i = 0; i < now.size() / 2; ++i) {
      if (u(rng) < c.fraction) {
        // All changed: XOR values uniform over 1..255, so no byte group of
        // the XOR chunk compresses and the full form is smallest.
        now[2 * i] ^=
            c.fraction == 1.0 ? static_cast<uint8_t>(rng() % 255 + 1) : 1;
        if (c.fraction == 1.0) now[2 * i + 1] = static_cast<uint8_t>(rng());
      }
    }
    Encoded e = Encode(before, now);
    EXPECT_EQ(static_cast<BucketKind>(e.wire[0]), c.kind) << c.fraction;
    EXPECT_LE(e.wire.size(), 1 + now.size());
    Status s;
    EXPECT_EQ(Decode(e.wire, before, &s), now) << c.fraction;
    EXPECT_TRUE(s.ok()) << s;
  }
}

// On a fast link (the default, 10 Gb/s) the codec's encode and decode
// take longer than sending: a bucket with many changes goes whole, few
// changes as pairs, and the codec is never run.
TEST(WireTest, FastLinkChoosesByTime) {
  std::mt19937_64 rng(5);
  std::vector<uint8_t> before(1 << 16);
  for (auto& b : before) b = static_cast<uint8_t>(rng() & 0x3F);
  std::uniform_real_distribution<double> u(0, 1);
  for (auto [fraction, kind] : {std::pair{0.05, BucketKind::kPairs},
                                std::pair{0.5, BucketKind::kFull}}) {
    std::vector<uint8_t> now = before;
    int64_t want = 0;
    for (size_t i = 0; i < now.size() / 2; ++i) {
      if (u(rng) < fraction) {
        now[2 * i] ^= 1;
        ++want;
      }
    }
    Encoded e = Encode(before, now, DeltaCost());
    EXPECT_EQ(static_cast<BucketKind>(e.wire[0]), kind) << fraction;
    EXPECT_EQ(e.changed, want);
    Status s;
    EXPECT_EQ(Decode(e.wire, before, &s), now) << fraction;
    EXPECT_TRUE(s.ok()) << s;
    // The same bucket on a slow link: XOR chunk when it is the smallest.
    Encoded slow = Encode(before, now);
    EXPECT_LE(slow.wire.size(), e.wire.size());
  }
}

// Changes are found in every lane of a word, in the words a 4-word stride
// leaves over, and in a tail shorter than a word, for 1-, 2-, 4- and
// 8-byte elements; decoding in place over the previous copy works.
TEST(WireTest, FindsEveryChangedElementAndDecodesInPlace) {
  for (size_t es : {1, 2, 4, 8}) {
    std::vector<uint8_t> before(8 * 37 + 3 * es);  // Odd words, a tail.
    for (size_t i = 0; i < before.size(); ++i) before[i] = uint8_t(i * 7);
    std::vector<uint8_t> now = before;
    const size_t count = now.size() / es;
    std::vector<size_t> changed = {0, 1, count / 2, count - 2, count - 1};
    for (size_t i : changed) now[i * es + es - 1] ^= 0x80;  // Top byte.
    WireBuffer wire;
    int64_t n = 0;
    ASSERT_TRUE(EncodeDelta(DType::kU8, es, ConstBytes(before), ConstBytes(now),
                            &wire, &n)
                    .ok());
    EXPECT_EQ(n, 5) << es;
    ASSERT_EQ(static_cast<BucketKind>(wire[0]), BucketKind::kPairs) << es;
    std::vector<uint8_t> in_place = before;
    bool unchanged = false;
    ASSERT_TRUE(DecodeBucket(ConstBytes(wire.data(), wire.size()), DType::kU8,
                             es, ConstBytes(in_place), MutableBytes(in_place),
                             &unchanged)
                    .ok());
    EXPECT_EQ(in_place, now) << es;
  }
}

TEST(WireTest, DamageAndWrongBaseAreDataLoss) {
  std::mt19937_64 rng(4);
  std::vector<uint8_t> before(4096);
  for (auto& b : before) b = static_cast<uint8_t>(rng());
  for (double fraction : {0.0, 0.01, 0.5}) {
    std::vector<uint8_t> now = before;
    for (size_t i = 0; i < now.size(); i += 2) {
      if ((rng() % 1000) < fraction * 1000) now[i] ^= 0x10;
    }
    Encoded e = Encode(before, now);
    ASSERT_NE(static_cast<BucketKind>(e.wire[0]), BucketKind::kFull);
    // Every single-byte flip is caught.
    for (size_t at = 0; at < e.wire.size(); at += 1 + e.wire.size() / 97) {
      WireBuffer bad = e.wire;
      bad[at] ^= 0x40;
      Status s;
      std::vector<uint8_t> out = Decode(bad, before, &s);
      EXPECT_FALSE(s.ok() && out != now) << "silently wrong at " << at;
      if (!s.ok()) {
        EXPECT_TRUE(s.IsDataLoss()) << s;
      }
    }
    // Truncation.
    std::vector<uint8_t> cut(e.wire.begin(), e.wire.end() - 1);
    Status s;
    Decode(cut, before, &s);
    EXPECT_TRUE(s.IsDataLoss()) << s;
    // A receiver whose previous copy differs.
    std::vector<uint8_t> other = before;
    other[100] ^= 1;
    Decode(e.wire, other, &s);
    EXPECT_TRUE(s.IsDataLoss()) << fraction << " " << s;
  }
}

// A bucket of no elements (a peer list of empty transfers) decodes: the
// full form has no body to copy (the reshard fuzzer found the copy from a
// null buffer it made before).
TEST(WireTest, EmptyBucketDecodes) {
  const uint8_t full[] = {static_cast<uint8_t>(BucketKind::kFull)};
  bool unchanged = true;
  EXPECT_TRUE(DecodeBucket(ConstBytes(full, 1), DType::kBF16, 2, ConstBytes(),
                           MutableBytes(), &unchanged)
                  .ok());
  EXPECT_FALSE(unchanged);
}

}  // namespace
}  // namespace hy::reshard::internal
