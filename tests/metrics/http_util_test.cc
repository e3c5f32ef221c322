#include "http_util.h"

#include <gtest/gtest.h>

namespace hy::metrics::internal {
namespace {

TEST(AcceptsGzipTest, ContentNegotiation) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("GZIP"));
  EXPECT_TRUE(AcceptsGzip("x-gzip"));
  EXPECT_TRUE(AcceptsGzip("deflate, gzip;q=1.0, *;q=0.5"));
  EXPECT_TRUE(AcceptsGzip("identity, gzip ; q=0.2"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("identity"));
  EXPECT_FALSE(AcceptsGzip("deflate, br"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0.0, *"));  // Explicit refusal wins.
  EXPECT_FALSE(AcceptsGzip("*;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=abc"));  // Malformed q: not accepted.
  EXPECT_FALSE(AcceptsGzip("gzipx"));
}

TEST(PercentEncodeTest, KeepsOnlyUnreserved) {
  EXPECT_EQ(PercentEncode("aZ09-._~"), "aZ09-._~");
  EXPECT_EQ(PercentEncode("a b/c?d&e=f%"), "a%20b%2Fc%3Fd%26e%3Df%25");
  EXPECT_EQ(PercentEncode("\xC3\xA9"), "%C3%A9");
  EXPECT_EQ(PercentEncode(""), "");
}

TEST(Base64UrlTest, Rfc4648Vectors) {
  EXPECT_EQ(Base64UrlEncode(""), "");
  EXPECT_EQ(Base64UrlEncode("f"), "Zg==");
  EXPECT_EQ(Base64UrlEncode("fo"), "Zm8=");
  EXPECT_EQ(Base64UrlEncode("foo"), "Zm9v");
  EXPECT_EQ(Base64UrlEncode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64UrlEncode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64UrlEncode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64UrlEncode("\xFB\xFF"), "-_8=");  // URL-safe alphabet.
  EXPECT_EQ(Base64UrlEncode("/var/tmp"), "L3Zhci90bXA=");
}

TEST(GzipTest, RoundTrip) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "hy_metric{a=\"b\"} 1\n";
  auto packed = GzipCompress(text);
  ASSERT_TRUE(packed.ok());
  EXPECT_LT(packed->size(), text.size() / 10);
  EXPECT_EQ(static_cast<unsigned char>((*packed)[0]), 0x1f);  // gzip magic.
  EXPECT_EQ(static_cast<unsigned char>((*packed)[1]), 0x8b);
  auto unpacked = GzipDecompress(*packed);
  ASSERT_TRUE(unpacked.ok());
  EXPECT_EQ(*unpacked, text);
  auto empty = GzipCompress("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*GzipDecompress(*empty), "");
}

TEST(GzipTest, CorruptInputIsDataLoss) {
  EXPECT_TRUE(GzipDecompress("not gzip").status().IsDataLoss());
  auto packed = GzipCompress("some text to compress");
  ASSERT_TRUE(packed.ok());
  std::string truncated = packed->substr(0, packed->size() - 5);
  EXPECT_TRUE(GzipDecompress(truncated).status().IsDataLoss());
}

TEST(AddressTest, LoopbackAndIpv4) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackAddress("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackAddress("localhost"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("127.0.0"));
  EXPECT_FALSE(IsLoopbackAddress("127.0.0.256"));
  EXPECT_TRUE(IsIpv4Address("0.0.0.0"));
  EXPECT_TRUE(IsIpv4Address("192.168.1.20"));
  EXPECT_FALSE(IsIpv4Address("1.2.3"));
  EXPECT_FALSE(IsIpv4Address("1.2.3.4.5"));
  EXPECT_FALSE(IsIpv4Address("a.b.c.d"));
  EXPECT_FALSE(IsIpv4Address("::1"));
  EXPECT_FALSE(IsIpv4Address(""));
}

}  // namespace
}  // namespace hy::metrics::internal
