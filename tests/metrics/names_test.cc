#include "hy/metrics/names.h"

#include <gtest/gtest.h>

namespace hy::metrics {
namespace {

TEST(NamesTest, MetricNames) {
  for (const char* ok : {"a", "_", ":", "hy_reshard_bytes_total", "a1:b_2",
                         "A_Z", "job:rate5m"}) {
    EXPECT_TRUE(ValidateMetricName(ok).ok()) << ok;
  }
  for (const char* bad :
       {"", "1a", "a-b", "a.b", "a b", "é", "__reserved", "a\n", "a{b}"}) {
    Status s = ValidateMetricName(bad);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
  }
}

TEST(NamesTest, LabelNames) {
  for (const char* ok : {"a", "_", "_a", "kind", "a1_B2"}) {
    EXPECT_TRUE(ValidateLabelName(ok).ok()) << ok;
  }
  for (const char* bad : {"", "1a", "a:b", ":", "__name__", "__x", "a-b"}) {
    EXPECT_TRUE(ValidateLabelName(bad).IsInvalidArgument()) << bad;
  }
}

TEST(NamesTest, MessagesNameTheProblem) {
  EXPECT_NE(ValidateLabelName("__name__").message().find("reserves"),
            std::string_view::npos);
  EXPECT_NE(ValidateMetricName("a-b").message().find("at 1"),
            std::string_view::npos);
}

TEST(NamesTest, Utf8) {
  EXPECT_TRUE(ValidateUtf8("", "x").ok());
  EXPECT_TRUE(ValidateUtf8("plain ascii", "x").ok());
  EXPECT_TRUE(ValidateUtf8("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80", "x")
                  .ok());  // é € 😀
  for (std::string bad : {
           std::string("\xC3"),              // Truncated.
           std::string("\xC0\xAF"),          // Overlong '/'.
           std::string("\xE0\x80\xAF"),      // Overlong.
           std::string("\xED\xA0\x80"),      // Surrogate U+D800.
           std::string("\xF4\x90\x80\x80"),  // Past U+10FFFF.
           std::string("\xFF"),              // Never valid.
           std::string("a\x80"),             // Stray continuation.
       }) {
    EXPECT_TRUE(ValidateUtf8(bad, "value").IsInvalidArgument());
  }
}

TEST(NamesTest, ValidateLabels) {
  EXPECT_TRUE(ValidateLabels({{"a", "x"}, {"b", ""}}).ok());
  EXPECT_TRUE(ValidateLabels({{"1a", "x"}}).IsInvalidArgument());
  EXPECT_TRUE(ValidateLabels({{"a", "\xFF"}}).IsInvalidArgument());
}

}  // namespace
}  // namespace hy::metrics
