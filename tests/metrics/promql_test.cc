// The PromQL scanner and Grafana substitution that the dashboard tests use.

#include "promql.h"

#include <gtest/gtest.h>

namespace hy::metrics::testing {
namespace {

TEST(FindSelectorsTest, NamesFunctionsAndRanges) {
  auto uses = FindSelectors(
      "histogram_quantile(0.99, sum by (direction, le) "
      "(rate(hy_x_seconds_bucket{job=~\"$job\", le!=\"sum(\"}"
      "[$__rate_interval])))");
  ASSERT_TRUE(uses.ok()) << uses.status();
  ASSERT_EQ(uses->size(), 1u);
  EXPECT_EQ((*uses)[0].metric, "hy_x_seconds_bucket");
  EXPECT_EQ((*uses)[0].functions,
            (std::vector<std::string>{"histogram_quantile", "sum", "rate"}));
  EXPECT_EQ((*uses)[0].range, "$__rate_interval");
}

TEST(FindSelectorsTest, BinaryExpressionsAndKeywords) {
  auto uses = FindSelectors(
      "sum(rate(a_total[5m])) / on (job) group_left (x) sum without (k) "
      "(b_total offset 5m) > bool 0 or max(c) by (instance) and count(d)");
  ASSERT_TRUE(uses.ok()) << uses.status();
  std::vector<std::string> names;
  for (const auto& u : *uses) names.push_back(u.metric);
  EXPECT_EQ(names, (std::vector<std::string>{"a_total", "b_total", "c", "d"}));
  EXPECT_EQ((*uses)[0].range, "5m");
  EXPECT_EQ((*uses)[1].functions, (std::vector<std::string>{"sum"}));
  EXPECT_EQ((*uses)[2].functions, (std::vector<std::string>{"max"}));
}

TEST(FindSelectorsTest, Unbalanced) {
  EXPECT_FALSE(FindSelectors("sum(rate(x[5m])").ok());
  EXPECT_FALSE(FindSelectors("x{a=\"b}").ok());
  EXPECT_FALSE(FindSelectors("x)").ok());
}

TEST(SubstituteVariablesTest, AllForms) {
  std::map<std::string, std::string> v = {{"__rate_interval", "4s"},
                                          {"job", ".*"}};
  EXPECT_EQ(*SubstituteVariables(
                "rate(x{job=~\"$job\"}[$__rate_interval]) ${job} ${job:regex} "
                "[[job]]",
                v),
            "rate(x{job=~\".*\"}[4s]) .* .* .*");
  EXPECT_EQ(SubstituteVariables("$nope", v).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(*SubstituteVariables("no variables", v), "no variables");
}

}  // namespace
}  // namespace hy::metrics::testing
