// The positions of a kPairs bucket go as gaps of one byte or five: they
// round-trip for gaps at and around the escape (255, 256), the largest
// gap and a first position of 0, and take one byte per narrow gap; a
// header that cannot hold its count is DataLoss.

#include "pairs.h"

#include <gtest/gtest.h>

#include <vector>

namespace hy::reshard::internal {
namespace {

std::vector<uint32_t> ReadBack(const WireBuffer& b, size_t es,
                               uint64_t elements, PairsView* view) {
  std::vector<uint32_t> got;
  EXPECT_TRUE(
      ParsePairs(ConstBytes(b.data(), b.size()), es, elements, view).ok());
  for (uint64_t i = 0; got.size() < view->count && view->gaps.Next(&i);) {
    got.push_back(static_cast<uint32_t>(i));
  }
  return got;
}

TEST(PairsTest, GapsRoundTripAroundTheEscapeAndAtTheLimit) {
  const std::vector<uint32_t> index = {0,   1,    256,  512,   513,
                                       768, 1023, 1024, 70000, 0xFFFFFFFDu};
  WireBuffer b;
  uint8_t* values = StartPairs(42, index.data(), index.size(), 4, &b);
  for (size_t k = 0; k < index.size(); ++k) {
    std::memcpy(values + 4 * k, &index[k], 4);
  }
  // Gaps 1 1 255 256 1 255 255 1 68976 4294897661: three escaped.
  EXPECT_EQ(GapBytes(index.data(), index.size()), index.size() + 3 * 4);
  EXPECT_EQ(b.size(), kPairsHeader + index.size() * 4 + index.size() + 12);
  PairsView view;
  EXPECT_EQ(ReadBack(b, 4, uint64_t{1} << 32, &view), index);
  EXPECT_TRUE(view.gaps.AtEnd());
  EXPECT_EQ(view.checksum, 42u);
  for (size_t k = 0; k < index.size(); ++k) {
    uint32_t v;
    std::memcpy(&v, view.values + 4 * k, 4);
    EXPECT_EQ(v, index[k]);
  }
}

TEST(PairsTest, NoChangesAndDenseChanges) {
  WireBuffer b;
  StartPairs(7, nullptr, 0, 2, &b);
  EXPECT_EQ(b.size(), kPairsHeader);
  PairsView view;
  EXPECT_TRUE(ReadBack(b, 2, 10, &view).empty());
  EXPECT_TRUE(view.gaps.AtEnd());
  std::vector<uint32_t> every(1000);
  for (uint32_t i = 0; i < every.size(); ++i) every[i] = i;
  StartPairs(7, every.data(), every.size(), 2, &b);
  EXPECT_EQ(b.size(), kPairsHeader + every.size() * 3);
  EXPECT_EQ(ReadBack(b, 2, every.size(), &view), every);
}

TEST(PairsTest, HeadersThatCannotHoldTheirCountAreDataLoss) {
  const std::vector<uint32_t> index = {3, 9};
  WireBuffer b;
  StartPairs(0, index.data(), index.size(), 2, &b);
  PairsView view;
  EXPECT_TRUE(ParsePairs(ConstBytes(b.data(), b.size()), 2, 10, &view).ok());
  // More changes than elements.
  EXPECT_TRUE(
      ParsePairs(ConstBytes(b.data(), b.size()), 2, 1, &view).IsDataLoss());
  // Cut short: fewer bytes than one per gap.
  EXPECT_TRUE(ParsePairs(ConstBytes(b.data(), b.size() - 1), 2, 10, &view)
                  .IsDataLoss());
  EXPECT_TRUE(ParsePairs(ConstBytes(b.data(), 5), 2, 10, &view).IsDataLoss());
  // Longer than five bytes per gap.
  b.resize(kPairsHeader + 2 * 2 + 11, 0);
  EXPECT_TRUE(
      ParsePairs(ConstBytes(b.data(), b.size()), 2, 10, &view).IsDataLoss());
  // Not a pairs bucket.
  b[0] = static_cast<uint8_t>(BucketKind::kFull);
  EXPECT_TRUE(
      ParsePairs(ConstBytes(b.data(), b.size()), 2, 10, &view).IsDataLoss());
}

}  // namespace
}  // namespace hy::reshard::internal
