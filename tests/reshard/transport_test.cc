#include "hy/reshard/transport.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace hy::reshard {
namespace {

// Transport's default AllGatherInto (over InProcessHub's AllGatherV): each
// rank's bytes land in its region; a region of the wrong size is Internal.
TEST(TransportTest, AllGatherIntoWritesEachRanksBytesInPlace) {
  const int world = 3;
  InProcessHub hub(world, 10000);
  auto bytes_of = [](int r) {  // Rank 1 sends nothing.
    std::vector<uint8_t> v(r == 1 ? 0 : 100 * r + 7);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(r * 31 + i);
    return v;
  };
  std::vector<std::vector<std::vector<uint8_t>>> got(world);
  std::vector<Status> status(world), wrong(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Transport> t = hub.Connect(r);
      const std::vector<uint8_t> mine = bytes_of(r);
      got[r].resize(world);
      std::vector<MutableBytes> into(world);
      for (int p = 0; p < world; ++p) {
        got[r][p].assign(bytes_of(p).size(), 0);
        into[p] = MutableBytes(got[r][p]);
      }
      status[r] = t->AllGatherInto(ConstBytes(mine), into);
      // Rank 0 expects one byte too many from rank 2.
      std::vector<uint8_t> big(bytes_of(2).size() + 1);
      if (r == 0) into[2] = MutableBytes(big);
      wrong[r] = t->AllGatherInto(ConstBytes(mine), into);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    for (int p = 0; p < world; ++p) {
      if (p == r) continue;
      EXPECT_EQ(got[r][p], bytes_of(p)) << "rank " << r << " from " << p;
    }
  }
  EXPECT_EQ(wrong[0].code(), StatusCode::kInternal) << wrong[0];
  EXPECT_TRUE(wrong[1].ok());
  EXPECT_TRUE(wrong[2].ok());
}

}  // namespace
}  // namespace hy::reshard
