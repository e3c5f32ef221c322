// Many threads updating metrics at once: exact totals, and scrapes taken
// meanwhile are always internally consistent.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "hy/metrics/registry.h"
#include "hy/metrics/text_format.h"

namespace hy::metrics {
namespace {

constexpr int kThreads = 8;
constexpr int kIterations = 100000;

TEST(ConcurrencyTest, ExactTotalsFromManyThreads) {
  Registry r;
  auto c = BuildCounter().Name("c_total").Help("C.").Register(r);
  auto g = BuildGauge().Name("g").Help("G.").Register(r);
  auto h = BuildHistogram().Name("h").Help("H.").Buckets({1, 2, 3}).Register(r);
  ASSERT_TRUE(c.ok() && g.ok() && h.ok());
  Counter* counter = *(*c)->Add({});
  Gauge* gauge = *(*g)->Add({});
  Histogram* histogram = *(*h)->Add({});

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        counter->Increment();
        counter->Increment(2);
        gauge->Increment(t % 2 == 0 ? 3 : -1);
        histogram->Observe(i % 4);  // 0, 1, 2, 3: one per finite bucket+.
      }
    });
  }
  for (auto& th : threads) th.join();

  const double n = double{kThreads} * kIterations;
  EXPECT_EQ(counter->Value(), 3 * n);
  EXPECT_EQ(gauge->Value(), n / 2 * 3 - n / 2);
  EXPECT_EQ(histogram->Count(), static_cast<uint64_t>(n));
  EXPECT_EQ(histogram->Sum(), n / 4 * (0 + 1 + 2 + 3));
  MetricSnapshot m;
  histogram->Collect(&m);
  EXPECT_EQ(m.buckets[0].cumulative_count, static_cast<uint64_t>(n / 2));
  EXPECT_EQ(m.buckets[1].cumulative_count, static_cast<uint64_t>(n * 3 / 4));
  EXPECT_EQ(m.buckets[2].cumulative_count, static_cast<uint64_t>(n));
  EXPECT_EQ(m.count, static_cast<uint64_t>(n));
}

TEST(ConcurrencyTest, ConcurrentAddYieldsOneChildPerLabelSet) {
  Registry r;
  auto f =
      BuildCounter().Name("c_total").Help("C.").LabelNames({"k"}).Register(r);
  ASSERT_TRUE(f.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        auto child = (*f)->Add({{"k", std::to_string(i % 10)}});
        if (child.ok()) (*child)->Increment();
      }
    });
  }
  for (auto& th : threads) th.join();
  auto snapshot = (*f)->Collect();
  ASSERT_EQ(snapshot.metrics.size(), 10u);
  for (const auto& m : snapshot.metrics) {
    EXPECT_EQ(m.value, kThreads * 100) << m.labels.at("k");
  }
}

TEST(ConcurrencyTest, ScrapesDuringUpdatesAreConsistent) {
  Registry r;
  auto h = BuildHistogram()
               .Name("h")
               .Help("H.")
               .LabelNames({"k"})
               .Buckets({0.5, 1.5})
               .Register(r);
  auto reg = BuildGauge().Name("late").Help("L.").LabelNames({"i"});
  ASSERT_TRUE(h.ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      Histogram* mine = *(*h)->Add({{"k", std::to_string(t)}});
      for (int i = 0; !stop.load(); ++i) {
        mine->Observe(i % 3);
        if (i % 1000 == 0) {  // Registration while scraping, too.
          auto f = reg.Register(r);
          if (f.ok()) (void)(*f)->Add({{"i", std::to_string(i % 7)}});
        }
      }
    });
  }
  int scrapes = 0;
  for (; scrapes < 200; ++scrapes) {
    for (const auto& family : r.Collect()) {
      for (const auto& m : family.metrics) {
        uint64_t previous = 0;
        for (const auto& b : m.buckets) {
          ASSERT_GE(b.cumulative_count, previous);  // Cumulative.
          previous = b.cumulative_count;
        }
        ASSERT_GE(m.count, previous);  // +Inf bucket == count >= the rest.
      }
    }
    std::string text = SerializeText(r.Collect());
    ASSERT_EQ(text.back(), '\n');
  }
  stop = true;
  for (auto& th : writers) th.join();
  EXPECT_EQ(scrapes, 200);
}

}  // namespace
}  // namespace hy::metrics
