#include "hy/common/hash.h"

#include <gtest/gtest.h>

#include <string>

namespace hy {
namespace {

TEST(HashTest, KnownVectors) {
  // Published XXH3 values for the empty input, seed 0.
  EXPECT_EQ(Checksum64(ConstBytes()), 0x2D06800538D394C2ull);
  EXPECT_EQ(ContentHash(ConstBytes()).ToHex(),
            "99aa06d3014798d86001c324468d497f");
}

TEST(HashTest, DifferentInputsDiffer) {
  std::string a(4096, 'x');
  std::string b = a;
  b[4095] = 'y';
  EXPECT_NE(Checksum64(a), Checksum64(b));
  EXPECT_NE(ContentHash(a), ContentHash(b));
  EXPECT_EQ(ContentHash(a), ContentHash(std::string(4096, 'x')));
}

TEST(HashTest, HexRoundTrip) {
  Hash128 h = ContentHash(std::string("layer.0.weight"));
  Result<Hash128> back = Hash128::FromHex(h.ToHex());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, h);
  EXPECT_EQ(*Hash128::FromHex("0123456789ABCDEF0123456789abcdef"),
            (Hash128{0x0123456789abcdefull, 0x0123456789abcdefull}));
  EXPECT_TRUE(Hash128::FromHex("abc").status().IsInvalidArgument());
  EXPECT_TRUE(Hash128::FromHex(std::string(31, '0') + "g")
                  .status()
                  .IsInvalidArgument());
}

TEST(HashTest, CanonicalBytesSortLikeHex) {
  Hash128 lo{0xFFFFFFFFFFFFFFFFull, 1};
  Hash128 hi{0, 2};
  EXPECT_LT(lo, hi);
  EXPECT_LT(lo.ToHex(), hi.ToHex());
  uint8_t a[16], b[16];
  lo.EncodeTo(a);
  hi.EncodeTo(b);
  EXPECT_LT(std::string(reinterpret_cast<char*>(a), 16),
            std::string(reinterpret_cast<char*>(b), 16));
  EXPECT_EQ(Hash128::DecodeFrom(a), lo);
}

TEST(HashTest, IncrementalMatchesOneShot) {
  std::string data;
  for (int i = 0; i < 100000; ++i) data.push_back(static_cast<char>(i * 31));
  Hasher128 h;
  h.Update(ConstBytes(data).subspan(0, 7));
  h.Update(ConstBytes(data).subspan(7, 50000));
  h.Update(ConstBytes(data).subspan(50007));
  EXPECT_EQ(h.Digest(), ContentHash(data));
}

TEST(HashTest, Incremental64MatchesOneShot) {
  std::string data;
  for (int i = 0; i < 100000; ++i) data.push_back(static_cast<char>(i * 7));
  Hasher64 h;
  h.Update(ConstBytes(data).subspan(0, 3));
  h.Update(ConstBytes(data).subspan(3, 60000));
  h.Update(ConstBytes(data).subspan(60003));
  EXPECT_EQ(h.Digest(), Checksum64(data));
  Hasher64 other;
  other.Update(ConstBytes(data).subspan(1));
  EXPECT_NE(other.Digest(), Checksum64(data));
}

}  // namespace
}  // namespace hy
