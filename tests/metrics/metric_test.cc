#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "hy/metrics/counter.h"
#include "hy/metrics/gauge.h"
#include "hy/metrics/histogram.h"

namespace hy::metrics {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(CounterTest, CountsUpAndDropsInvalidDeltas) {
  Counter c;
  EXPECT_EQ(c.Value(), 0);
  c.Increment();
  c.Increment(2.5);
  c.Increment(0);
  EXPECT_EQ(c.Value(), 3.5);
  c.Increment(-1);
  c.Increment(kNaN);
  c.Increment(kInf);
  EXPECT_EQ(c.Value(), 3.5);
  MetricSnapshot m;
  c.Collect(&m);
  EXPECT_EQ(m.value, 3.5);
}

TEST(GaugeTest, SetIncrementDecrement) {
  Gauge g;
  g.Set(10);
  g.Increment();
  g.Increment(4);
  g.Decrement();
  g.Decrement(20);
  EXPECT_EQ(g.Value(), -6);
  g.Set(kNaN);
  EXPECT_TRUE(std::isnan(g.Value()));
  g.Set(-kInf);
  EXPECT_EQ(g.Value(), -kInf);
}

TEST(GaugeTest, SetToCurrentTime) {
  Gauge g;
  g.SetToCurrentTime();
  EXPECT_GT(g.Value(), 1.6e9);  // After 2020.
}

TEST(HistogramTest, BucketsAreInclusiveAndCumulative) {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 2.0, 2.0, 5.0, 7.0, -3.0}) h.Observe(v);
  MetricSnapshot m;
  h.Collect(&m);
  ASSERT_EQ(m.buckets.size(), 3u);
  EXPECT_EQ(m.buckets[0].upper_bound, 1);
  EXPECT_EQ(m.buckets[0].cumulative_count, 3u);  // 0.5, 1.0, -3.0
  EXPECT_EQ(m.buckets[1].cumulative_count, 6u);  // + 1.5, 2.0, 2.0
  EXPECT_EQ(m.buckets[2].cumulative_count, 7u);  // + 5.0
  EXPECT_EQ(m.count, 8u);                        // + 7.0 in +Inf
  EXPECT_EQ(m.sum, 16.0);
  EXPECT_EQ(h.Count(), 8u);
  EXPECT_EQ(h.Sum(), 16.0);
}

TEST(HistogramTest, DropsNonFiniteObservations) {
  Histogram h({1});
  h.Observe(kNaN);
  h.Observe(kInf);
  h.Observe(-kInf);
  EXPECT_EQ(h.Count(), 0u);
  EXPECT_EQ(h.Sum(), 0);
}

TEST(HistogramTest, NoFiniteBuckets) {
  Histogram h({});
  h.Observe(3);
  MetricSnapshot m;
  h.Collect(&m);
  EXPECT_TRUE(m.buckets.empty());
  EXPECT_EQ(m.count, 1u);
}

TEST(HistogramTest, ValidateBuckets) {
  EXPECT_TRUE(ValidateBuckets({}).ok());
  EXPECT_TRUE(ValidateBuckets({-1, 0, 0.5, 1e9}).ok());
  EXPECT_TRUE(ValidateBuckets({1, 1}).IsInvalidArgument());
  EXPECT_TRUE(ValidateBuckets({2, 1}).IsInvalidArgument());
  EXPECT_TRUE(ValidateBuckets({1, kInf}).IsInvalidArgument());
  EXPECT_TRUE(ValidateBuckets({kNaN}).IsInvalidArgument());
}

TEST(HistogramTest, BucketHelpers) {
  auto e = ExponentialBuckets(0.001, 10, 4);
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(e->size(), 4u);
  EXPECT_DOUBLE_EQ((*e)[3], 1.0);
  auto l = LinearBuckets(-1, 0.5, 5);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(*l, (BucketBoundaries{-1, -0.5, 0, 0.5, 1}));
  EXPECT_TRUE(ExponentialBuckets(0, 2, 3).status().IsInvalidArgument());
  EXPECT_TRUE(ExponentialBuckets(1, 1, 3).status().IsInvalidArgument());
  EXPECT_TRUE(ExponentialBuckets(1, 2, 0).status().IsInvalidArgument());
  EXPECT_TRUE(LinearBuckets(0, 0, 3).status().IsInvalidArgument());
}

TEST(ScopedTimerTest, ObservesElapsedSecondsOnce) {
  Histogram h({0.001, 10});
  {
    ScopedTimer t(&h);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    double s = t.Stop();
    EXPECT_GE(s, 0.005);
    EXPECT_LT(s, 10);
    EXPECT_EQ(t.Stop(), 0);
  }
  EXPECT_EQ(h.Count(), 1u);
  { ScopedTimer t(&h); }
  EXPECT_EQ(h.Count(), 2u);
  { ScopedTimer t(nullptr); }  // Records nothing, does not crash.
}

}  // namespace
}  // namespace hy::metrics
