// Golden tests of the text exposition format 0.0.4.

#include "hy/metrics/text_format.h"

#include <gtest/gtest.h>

#include <clocale>
#include <cmath>
#include <limits>

#include "hy/metrics/registry.h"

namespace hy::metrics {
namespace {

TEST(FormatDoubleTest, MatchesGoStrconvShortestG) {
  // Expected strings are what Go's strconv.FormatFloat(v, 'g', -1, 64)
  // prints, as the Prometheus Go client does.
  const std::pair<double, const char*> cases[] = {
      {0, "0"},
      {-0.0, "0"},
      {1, "1"},
      {-1, "-1"},
      {2.5, "2.5"},
      {-2.5, "-2.5"},
      {0.001, "0.001"},
      {0.005, "0.005"},
      {0.0001, "0.0001"},
      {0.00001, "1e-05"},
      {1.5e-7, "1.5e-07"},
      {123456, "123456"},
      {999999, "999999"},
      {1e6, "1e+06"},
      {1234567, "1.234567e+06"},
      {1e21, "1e+21"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {5e-324, "5e-324"},
      {0.1 + 0.2, "0.30000000000000004"},
      {60, "60"},
      {100, "100"},
      {4096, "4096"},
      {9007199254740992.0, "9.007199254740992e+15"},
  };
  for (const auto& [value, expected] : cases) {
    EXPECT_EQ(FormatDouble(value), expected) << value;
  }
  EXPECT_EQ(FormatDouble(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatDouble(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatDouble(std::nan("")), "NaN");
}

TEST(FormatDoubleTest, RoundTrips) {
  for (double v : {0.1, 1.0 / 3, 2.0 / 3 * 1e-9, 12345.678, 6.02214076e23}) {
    EXPECT_EQ(std::stod(FormatDouble(v)), v);
  }
}

TEST(FormatDoubleTest, IgnoresTheLocale) {
  // A locale with ',' as the decimal separator must not leak into the output.
  const char* old = std::setlocale(LC_NUMERIC, nullptr);
  std::string saved = old != nullptr ? old : "C";
  bool switched = false;
  for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8"}) {
    if (std::setlocale(LC_NUMERIC, name) != nullptr) {
      switched = true;
      break;
    }
  }
  EXPECT_EQ(FormatDouble(2.5), "2.5");
  EXPECT_EQ(FormatDouble(1.5e-7), "1.5e-07");
  std::setlocale(LC_NUMERIC, saved.c_str());
  if (!switched) {
    GTEST_LOG_(INFO) << "no comma-decimal locale installed; checked in C";
  }
}

TEST(EscapeTest, Help) {
  EXPECT_EQ(EscapeHelp("plain"), "plain");
  EXPECT_EQ(EscapeHelp("a\\b\nc\"d"), "a\\\\b\\nc\"d");  // '"' kept.
}

TEST(EscapeTest, LabelValue) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\\b\nc\"d"), "a\\\\b\\nc\\\"d");
  EXPECT_EQ(EscapeLabelValue("tab\tand \xC3\xA9"), "tab\tand \xC3\xA9");
}

TEST(TextFormatTest, ContentType) {
  EXPECT_EQ(kTextContentType, "text/plain; version=0.0.4; charset=utf-8");
}

TEST(TextFormatTest, Counter) {
  Registry r;
  auto f = BuildCounter()
               .Name("hy_test_bytes_total")
               .Help("Bytes.")
               .LabelNames({"kind"})
               .Register(r);
  ASSERT_TRUE(f.ok());
  (*(*f)->Add({{"kind", "remote"}}))->Increment(1.5e6);
  (*(*f)->Add({{"kind", "local"}}))->Increment(4096);
  EXPECT_EQ(SerializeText(r.Collect()),
            "# HELP hy_test_bytes_total Bytes.\n"
            "# TYPE hy_test_bytes_total counter\n"
            "hy_test_bytes_total{kind=\"local\"} 4096\n"
            "hy_test_bytes_total{kind=\"remote\"} 1.5e+06\n");
}

TEST(TextFormatTest, GaugeWithoutLabelsAndSpecialValues) {
  Registry r;
  auto f = BuildGauge().Name("g").Help("A gauge.").Register(r);
  ASSERT_TRUE(f.ok());
  (*(*f)->Add({}))->Set(-std::numeric_limits<double>::infinity());
  auto n =
      BuildGauge().Name("n").Help("NaN gauge.").LabelNames({"a"}).Register(r);
  ASSERT_TRUE(n.ok());
  (*(*n)->Add({{"a", "x"}}))->Set(std::nan(""));
  (*(*n)->Add({{"a", "y"}}))->Set(std::numeric_limits<double>::infinity());
  EXPECT_EQ(SerializeText(r.Collect()),
            "# HELP g A gauge.\n"
            "# TYPE g gauge\n"
            "g -Inf\n"
            "# HELP n NaN gauge.\n"
            "# TYPE n gauge\n"
            "n{a=\"x\"} NaN\n"
            "n{a=\"y\"} +Inf\n");
}

TEST(TextFormatTest, Histogram) {
  Registry r;
  auto f = BuildHistogram()
               .Name("hy_test_seconds")
               .Help("Seconds.")
               .LabelNames({"phase"})
               .Buckets({0.005, 0.5, 1})
               .Register(r);
  ASSERT_TRUE(f.ok());
  Histogram* h = *(*f)->Add({{"phase", "plan"}});
  for (double v : {0.001, 0.005, 0.25, 3.0}) h->Observe(v);
  EXPECT_EQ(SerializeText(r.Collect()),
            "# HELP hy_test_seconds Seconds.\n"
            "# TYPE hy_test_seconds histogram\n"
            "hy_test_seconds_bucket{phase=\"plan\",le=\"0.005\"} 2\n"
            "hy_test_seconds_bucket{phase=\"plan\",le=\"0.5\"} 3\n"
            "hy_test_seconds_bucket{phase=\"plan\",le=\"1\"} 3\n"
            "hy_test_seconds_bucket{phase=\"plan\",le=\"+Inf\"} 4\n"
            // 0.001 + 0.005 + 0.25 + 3.0 in doubles, printed exactly.
            "hy_test_seconds_sum{phase=\"plan\"} 3.2560000000000002\n"
            "hy_test_seconds_count{phase=\"plan\"} 4\n");
}

TEST(TextFormatTest, HistogramWithoutLabels) {
  Registry r;
  auto f = BuildHistogram().Name("h").Help("H.").Buckets({1}).Register(r);
  ASSERT_TRUE(f.ok());
  (*(*f)->Add({}))->Observe(1);
  EXPECT_EQ(SerializeText(r.Collect()),
            "# HELP h H.\n"
            "# TYPE h histogram\n"
            "h_bucket{le=\"1\"} 1\n"
            "h_bucket{le=\"+Inf\"} 1\n"
            "h_sum 1\n"
            "h_count 1\n");
}

TEST(TextFormatTest, EscapingInHelpAndLabelValues) {
  Registry r;
  auto f = BuildCounter()
               .Name("c_total")
               .Help("Line one\nline two with \\ and \"quotes\".")
               .LabelNames({"path"})
               .Register(r);
  ASSERT_TRUE(f.ok());
  (*(*f)->Add({{"path", "C:\\dir\n\"x\""}}))->Increment();
  EXPECT_EQ(SerializeText(r.Collect()),
            "# HELP c_total Line one\\nline two with \\\\ and \"quotes\".\n"
            "# TYPE c_total counter\n"
            "c_total{path=\"C:\\\\dir\\n\\\"x\\\"\"} 1\n");
}

TEST(TextFormatTest, LabelsSortedByNameAndConstLabelsMerged) {
  Registry r;
  auto f = BuildGauge()
               .Name("g")
               .Help("G.")
               .LabelNames({"zeta", "alpha"})
               .ConstLabels({{"mid", "c"}})
               .Register(r);
  ASSERT_TRUE(f.ok());
  (*(*f)->Add({{"zeta", "z"}, {"alpha", "a"}}))->Set(1);
  EXPECT_EQ(SerializeText(r.Collect()),
            "# HELP g G.\n"
            "# TYPE g gauge\n"
            "g{alpha=\"a\",mid=\"c\",zeta=\"z\"} 1\n");
}

TEST(TextFormatTest, FamilyWithoutChildrenHasOnlyHelpAndType) {
  Registry r;
  ASSERT_TRUE(BuildHistogram()
                  .Name("h")
                  .Help("H.")
                  .LabelNames({"a"})
                  .Buckets({1})
                  .Register(r)
                  .ok());
  EXPECT_EQ(SerializeText(r.Collect()), "# HELP h H.\n# TYPE h histogram\n");
  EXPECT_EQ(SerializeText({}), "");
}

TEST(TextFormatTest, FamiliesInRegistrationOrderEachContiguous) {
  Registry r;
  auto b = BuildGauge().Name("b").Help("B.").LabelNames({"k"}).Register(r);
  auto a = BuildGauge().Name("a").Help("A.").Register(r);
  ASSERT_TRUE(a.ok() && b.ok());
  (*(*b)->Add({{"k", "2"}}))->Set(2);
  (*(*a)->Add({}))->Set(1);
  (*(*b)->Add({{"k", "1"}}))->Set(1);
  EXPECT_EQ(SerializeText(r.Collect()),
            "# HELP b B.\n# TYPE b gauge\nb{k=\"1\"} 1\nb{k=\"2\"} 2\n"
            "# HELP a A.\n# TYPE a gauge\na 1\n");
}

TEST(MergeFamiliesTest, MergesSameFamilyAndDropsConflicts) {
  MetricFamilySnapshot g1{"g", "G.", MetricType::kGauge, {}};
  g1.metrics.push_back({{{"k", "1"}}, 1, {}, 0, 0});
  MetricFamilySnapshot g2 = g1;
  g2.metrics[0].value = 99;  // Same label set: dropped.
  g2.metrics.push_back({{{"k", "2"}}, 2, {}, 0, 0});
  MetricFamilySnapshot other{"h", "H.", MetricType::kGauge, {}};
  MetricFamilySnapshot wrong_type{"g", "G.", MetricType::kCounter, {}};
  MetricFamilySnapshot wrong_help{"g", "other help", MetricType::kGauge, {}};
  size_t dropped = 0;
  auto merged =
      MergeFamilies({g1, other, g2, wrong_type, wrong_help}, &dropped);
  EXPECT_EQ(dropped, 3u);
  EXPECT_EQ(SerializeText(merged),
            "# HELP g G.\n# TYPE g gauge\ng{k=\"1\"} 1\ng{k=\"2\"} 2\n"
            "# HELP h H.\n# TYPE h gauge\n");
}

}  // namespace
}  // namespace hy::metrics
