#include "hy/common/edit_distance.h"

#include <gtest/gtest.h>

namespace hy {
namespace {

TEST(EditDistanceTest, CountsInsertionsDeletionsSubstitutions) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("step", "step"), 0u);
  EXPECT_EQ(EditDistance("stepp", "step"), 1u);       // A deletion.
  EXPECT_EQ(EditDistance("inspekt", "inspect"), 1u);  // A substitution.
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("abc", "cab"), 2u);
}

TEST(EditDistanceTest, NearestNameWithinTheLimit) {
  const std::vector<std::string> names = {"step", "version-id", "store"};
  EXPECT_EQ(NearestName("stepp", names), "step");
  EXPECT_EQ(NearestName("stor", names), "store");
  EXPECT_EQ(NearestName("versionid", names), "version-id");
  EXPECT_EQ(NearestName("completely-else", names), "");
  EXPECT_EQ(NearestName("stxxx", names, 1), "");
}

}  // namespace
}  // namespace hy
