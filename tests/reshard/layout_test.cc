#include "hy/reshard/layout.h"

#include <gtest/gtest.h>

#include <set>

namespace hy::reshard {
namespace {

TEST(LayoutTest, ParsesAndPrintsCanonically) {
  struct Case {
    const char* in;
    const char* out;
  } cases[] = {
      {"fsdp=8", "fsdp=8"},
      {"tp=2,pp=2,dp=2", "tp=2,pp=2,dp=2"},
      {"dp=2,pp=2,tp=2", "tp=2,pp=2,dp=2"},
      {"tp=2,fsdp=4", "tp=2,fsdp=4"},
      {"tp=1,dp=1", "dp=1"},
      {"dp=1", "dp=1"},
      {"fsdp=4,dp=2,tp=2", "tp=2,dp=2,fsdp=4"},
      {"tp=2,dp=4,order=dp:2-tp-dp", "tp=2,dp=4,order=dp:2-tp-dp"},
      {"tp=2,dp=2,order=tp-dp", "tp=2,dp=2"},  // The default order.
      {"tp=2,dp=2,order=dp-tp", "tp=2,dp=2,order=dp-tp"},
  };
  for (const Case& c : cases) {
    auto layout = Layout::Parse(c.in);
    ASSERT_TRUE(layout.ok()) << c.in << ": " << layout.status();
    EXPECT_EQ(layout->ToString(), c.out) << c.in;
    auto again = Layout::Parse(layout->ToString());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->ToString(), c.out);
  }
}

TEST(LayoutTest, RejectsBadText) {
  for (const char* bad :
       {"", "tp", "tp=", "tp=0", "tp=-1", "tp=02", "tp=2,tp=2", "xx=2",
        "tp=2,,dp=2", "tp=1000000,dp=1000000", "tp=2,order=dp",
        "tp=2,dp=2,order=tp", "tp=4,order=tp:3-tp", "dp=2,order=dp:4",
        "tp=2,order=tp-tp:2", "tp=2,order=zz", "tp=2,order=tp,order=tp"}) {
    auto layout = Layout::Parse(bad);
    EXPECT_FALSE(layout.ok()) << "\"" << bad << "\" parsed as "
                              << (layout.ok() ? layout->ToString() : "");
    if (!layout.ok()) {
      EXPECT_TRUE(layout.status().IsInvalidArgument());
      EXPECT_NE(layout.status().message().find("layout"), std::string::npos);
    }
  }
}

TEST(LayoutTest, DefaultRankOrderHasTpFastestThenFsdpDpPp) {
  auto layout = Layout::Parse("tp=2,pp=3,dp=2,fsdp=2");
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->world_size(), 24);
  for (int r = 0; r < 24; ++r) {
    Coord c = layout->CoordOf(r);
    EXPECT_EQ(r, c.tp + 2 * (c.fsdp + 2 * (c.dp + 2 * c.pp))) << r;
    EXPECT_EQ(layout->RankOf(c), r);
  }
}

TEST(LayoutTest, EveryRankHasADistinctCoordinate) {
  for (const char* text :
       {"tp=2,dp=4,order=dp:2-tp-dp", "tp=4,pp=2", "tp=2,fsdp=2,dp=2",
        "fsdp=8", "tp=2,pp=2,dp=2,order=pp-dp-tp"}) {
    auto layout = Layout::Parse(text);
    ASSERT_TRUE(layout.ok()) << text << layout.status();
    std::set<std::tuple<int, int, int, int>> seen;
    for (int r = 0; r < layout->world_size(); ++r) {
      Coord c = layout->CoordOf(r);
      EXPECT_LT(c.tp, layout->tp());
      EXPECT_LT(c.dp, layout->dp());
      EXPECT_LT(c.pp, layout->pp());
      EXPECT_LT(c.fsdp, layout->fsdp());
      EXPECT_TRUE(seen.insert({c.tp, c.fsdp, c.dp, c.pp}).second) << text;
      EXPECT_EQ(layout->RankOf(c), r) << text;
    }
  }
}

TEST(LayoutTest, SplitOrderInterleavesDp) {
  // dp:2 fastest, then tp, then the rest of dp.
  auto layout = Layout::Parse("tp=2,dp=4,order=dp:2-tp-dp");
  ASSERT_TRUE(layout.ok());
  int tp_of[8], dp_of[8];
  for (int r = 0; r < 8; ++r) {
    tp_of[r] = layout->CoordOf(r).tp;
    dp_of[r] = layout->CoordOf(r).dp;
  }
  EXPECT_EQ(std::vector<int>(tp_of, tp_of + 8),
            (std::vector<int>{0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(std::vector<int>(dp_of, dp_of + 8),
            (std::vector<int>{0, 1, 0, 1, 2, 3, 2, 3}));
}

TEST(LayoutTest, MakeMatchesParse) {
  auto made = Layout::Make(2, 2, 1, 2);
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(made->ToString(), "tp=2,pp=2,fsdp=2");
  EXPECT_FALSE(Layout::Make(0, 1, 1, 1).ok());
}

}  // namespace
}  // namespace hy::reshard
