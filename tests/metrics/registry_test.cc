#include "hy/metrics/registry.h"

#include <gtest/gtest.h>

namespace hy::metrics {
namespace {

TEST(FamilySpecTest, ValidSpecs) {
  Registry r;
  EXPECT_TRUE(BuildCounter().Name("a_total").Help("x").Register(r).ok());
  EXPECT_TRUE(BuildGauge().Name("b").Help("x").Register(r).ok());
  EXPECT_TRUE(BuildHistogram()
                  .Name("c_seconds")
                  .Help("x")
                  .Buckets({1})
                  .Register(r)
                  .ok());
}

TEST(FamilySpecTest, RefusesWhatPrometheusOrPromtoolWouldNot) {
  Registry r;
  auto refused = [&](auto builder, const char* why) {
    Status s = builder.Register(r).status();
    EXPECT_TRUE(s.IsInvalidArgument()) << why << ": " << s;
  };
  refused(BuildCounter().Name("bad-name_total").Help("x"), "invalid name");
  refused(BuildCounter().Name("__x_total").Help("x"), "reserved prefix");
  refused(BuildCounter().Name("a:b_total").Help("x"), "colon");
  refused(BuildCounter().Name("requests").Help("x"), "counter without _total");
  refused(BuildCounter().Name("_total").Help("x"), "bare _total");
  refused(BuildGauge().Name("g_total").Help("x"), "gauge with _total");
  refused(BuildGauge().Name("g_count").Help("x"), "gauge with _count");
  refused(BuildHistogram().Name("h_bucket").Help("x"), "histogram _bucket");
  refused(BuildGauge().Name("g_sum").Help("x"), "gauge with _sum");
  refused(BuildGauge().Name("g").Help(""), "no help");
  refused(BuildGauge().Name("g").Help("\xFF"), "help not UTF-8");
  refused(BuildGauge().Name("g").Help("x").LabelNames({"1a"}), "label name");
  refused(BuildGauge().Name("g").Help("x").LabelNames({"__a"}), "reserved");
  refused(BuildHistogram().Name("h").Help("x").LabelNames({"le"}), "le");
  refused(BuildGauge().Name("g").Help("x").LabelNames({"quantile"}),
          "quantile");
  refused(BuildGauge().Name("g").Help("x").LabelNames({"a", "a"}),
          "duplicate label");
  refused(BuildGauge().Name("g").Help("x").LabelNames({"a"}).ConstLabels(
              {{"a", "1"}}),
          "const and variable");
  refused(BuildGauge().Name("g").Help("x").ConstLabels({{"a", ""}}),
          "empty const value");
  refused(BuildGauge().Name("g").Help("x").Buckets({1}), "buckets on gauge");
  refused(BuildHistogram().Name("h").Help("x").Buckets({2, 1}),
          "decreasing buckets");
  refused(BuildGauge().Name("g").Help("x").MaxChildren(0), "max_children 0");
  EXPECT_EQ(r.size(), 0u);
}

TEST(RegistryTest, IdenticalRegistrationReturnsTheSameFamily) {
  Registry r;
  auto b = BuildCounter().Name("x_total").Help("X.").LabelNames({"a", "b"});
  auto first = b.Register(r);
  auto again = BuildCounter()
                   .Name("x_total")
                   .Help("X.")
                   .LabelNames({"b", "a"})  // Order does not matter.
                   .Register(r);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(*first, *again);
  EXPECT_EQ(r.size(), 1u);
}

TEST(RegistryTest, DifferentSpecUnderATakenNameIsRefused) {
  Registry r;
  ASSERT_TRUE(BuildGauge().Name("x").Help("X.").Register(r).ok());
  EXPECT_EQ(BuildGauge().Name("x").Help("Other.").Register(r).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(BuildHistogram().Name("x").Help("X.").Register(r).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(BuildGauge()
                .Name("x")
                .Help("X.")
                .LabelNames({"a"})
                .Register(r)
                .status()
                .code(),
            StatusCode::kAlreadyExists);
}

TEST(RegistryTest, HistogramSampleNamesCollide) {
  Registry r;
  ASSERT_TRUE(BuildHistogram().Name("lat").Help("L.").Register(r).ok());
  // A gauge named like one of the histogram's series would be ambiguous.
  // ("lat_sum" is refused by the name rules already; "lat" by the registry.)
  EXPECT_EQ(BuildGauge().Name("lat").Help("L.").Register(r).status().code(),
            StatusCode::kAlreadyExists);
  Registry r2;
  ASSERT_TRUE(BuildGauge().Name("lat").Help("L.").Register(r2).ok());
  EXPECT_EQ(
      BuildHistogram().Name("lat").Help("L.").Register(r2).status().code(),
      StatusCode::kAlreadyExists);
}

TEST(FamilyTest, AddChecksLabelNamesAndValues) {
  Registry r;
  auto f = BuildCounter()
               .Name("x_total")
               .Help("X.")
               .LabelNames({"kind", "phase"})
               .Register(r);
  ASSERT_TRUE(f.ok());
  Family<Counter>* family = *f;
  EXPECT_TRUE(family->Add({{"kind", "a"}, {"phase", "b"}}).ok());
  EXPECT_TRUE(family->Add({{"kind", "a"}}).status().IsInvalidArgument());
  EXPECT_TRUE(family->Add({}).status().IsInvalidArgument());
  EXPECT_TRUE(family->Add({{"kind", "a"}, {"phase", "b"}, {"x", "c"}})
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(family->Add({{"kind", "a"}, {"other", "b"}})
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(
      family->Add({{"kind", ""}, {"phase", "b"}}).status().IsInvalidArgument());
  EXPECT_TRUE(family->Add({{"kind", "\xC3"}, {"phase", "b"}})
                  .status()
                  .IsInvalidArgument());
  EXPECT_EQ(family->size(), 1u);
}

TEST(FamilyTest, SameLabelsSameChild) {
  Registry r;
  auto f = BuildGauge().Name("g").Help("G.").LabelNames({"k"}).Register(r);
  ASSERT_TRUE(f.ok());
  auto a = (*f)->Add({{"k", "1"}});
  auto b = (*f)->Add({{"k", "1"}});
  auto c = (*f)->Add({{"k", "2"}});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_TRUE((*f)->Has({{"k", "1"}}));
  EXPECT_FALSE((*f)->Has({{"k", "3"}}));
}

TEST(FamilyTest, RemoveDeletesOnlyOwnChildren) {
  Registry r;
  auto f = BuildGauge().Name("g").Help("G.").LabelNames({"k"}).Register(r);
  auto other = BuildGauge().Name("o").Help("O.").Register(r);
  ASSERT_TRUE(f.ok() && other.ok());
  Gauge* a = *(*f)->Add({{"k", "1"}});
  Gauge* foreign = *(*other)->Add({});
  EXPECT_TRUE((*f)->Remove(foreign).IsNotFound());
  EXPECT_TRUE((*f)->Remove(a).ok());
  EXPECT_FALSE((*f)->Has({{"k", "1"}}));
  EXPECT_TRUE((*f)->Remove(a).IsNotFound());
  EXPECT_EQ((*f)->Collect().metrics.size(), 0u);
}

TEST(FamilyTest, MaxChildrenGuardsAgainstLabelExplosion) {
  Registry r;
  auto f = BuildCounter()
               .Name("x_total")
               .Help("X.")
               .LabelNames({"k"})
               .MaxChildren(2)
               .Register(r);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE((*f)->Add({{"k", "1"}}).ok());
  EXPECT_TRUE((*f)->Add({{"k", "2"}}).ok());
  EXPECT_TRUE((*f)->Add({{"k", "1"}}).ok());  // Existing: fine.
  EXPECT_EQ((*f)->Add({{"k", "3"}}).status().code(),
            StatusCode::kResourceExhausted);
}

TEST(RegistryTest, CollectAndDescribe) {
  Registry r;
  auto h = BuildHistogram()
               .Name("h_seconds")
               .Help("H.")
               .LabelNames({"p"})
               .ConstLabels({{"c", "v"}})
               .Buckets({0.1, 1})
               .Register(r);
  ASSERT_TRUE(h.ok());
  (*(*h)->Add({{"p", "x"}}))->Observe(0.5);
  auto families = r.Collect();
  ASSERT_EQ(families.size(), 1u);
  EXPECT_EQ(families[0].name, "h_seconds");
  EXPECT_EQ(families[0].type, MetricType::kHistogram);
  ASSERT_EQ(families[0].metrics.size(), 1u);
  const MetricSnapshot& m = families[0].metrics[0];
  EXPECT_EQ(m.labels, (Labels{{"c", "v"}, {"p", "x"}}));
  EXPECT_EQ(m.count, 1u);
  ASSERT_EQ(m.buckets.size(), 2u);
  EXPECT_EQ(m.buckets[0].cumulative_count, 0u);
  EXPECT_EQ(m.buckets[1].cumulative_count, 1u);
  auto specs = r.Describe();
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].buckets, (BucketBoundaries{0.1, 1}));
  EXPECT_EQ(specs[0].type, MetricType::kHistogram);
  EXPECT_EQ(SampleNames(specs[0]),
            (std::vector<std::string>{"h_seconds", "h_seconds_bucket",
                                      "h_seconds_sum", "h_seconds_count"}));
}

}  // namespace
}  // namespace hy::metrics
