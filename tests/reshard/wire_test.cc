// The bucket wire format (internal to the executor): every delta form
// decodes to the same bytes as the full form, and damage is DataLoss.

#include "wire.h"

#include <gtest/gtest.h>

#include <random>

namespace hy::reshard::internal {
namespace {

std::vector<uint8_t> Full(const std::vector<uint8_t>& now) {
  std::vector<uint8_t> b(1 + now.size());
  b[0] = static_cast<uint8_t>(BucketKind::kFull);
  std::copy(now.begin(), now.end(), b.begin() + 1);
  return b;
}

struct Encoded {
  std::vector<uint8_t> wire;
  int64_t changed = 0;
};

Encoded Encode(const std::vector<uint8_t>& before,
               const std::vector<uint8_t>& now) {
  Encoded e;
  e.wire = Full(now);
  Status s = EncodeDelta(DType::kBF16, 2, ConstBytes(before), &e.wire, &e.changed);
  EXPECT_TRUE(s.ok()) << s;
  return e;
}

std::vector<uint8_t> Decode(const std::vector<uint8_t>& wire,
                            const std::vector<uint8_t>& before, Status* status) {
  std::vector<uint8_t> now(before.size(), 0xCC);
  bool unchanged = false;
  *status = DecodeBucket(ConstBytes(wire), DType::kBF16, 2, ConstBytes(before),
                         MutableBytes(now), &unchanged);
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
        now[2 * i] ^= c.fraction == 1.0 ? static_cast<uint8_t>(rng() | 1) : 1;
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
      std::vector<uint8_t> bad = e.wire;
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

}  // namespace
}  // namespace hy::reshard::internal
