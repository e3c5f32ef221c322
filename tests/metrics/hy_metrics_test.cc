// The catalogue of hy's metrics: every metric the design asks for exists with
// the right type, labels and buckets, follows the naming rules, and is
// documented in docs/metrics.md.

#include "hy/metrics/hy_metrics.h"

#include <gtest/gtest.h>

#include <set>

#include "hy/metrics/exposer.h"
#include "subprocess.h"

namespace hy::metrics {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::map<std::string, FamilySpec> Specs(const Registry& r) {
  std::map<std::string, FamilySpec> out;
  for (const FamilySpec& s : r.Describe()) out[s.name] = s;
  return out;
}

TEST(HyMetricsTest, EveryRequiredMetricWithTypeAndLabels) {
  Registry r;
  ASSERT_TRUE(HyMetrics::Register(r).ok());
  struct Want {
    const char* name;
    MetricType type;
    std::set<std::string> labels;
  };
  const Want wants[] = {
      {"hy_reshard_duration_seconds",
       MetricType::kHistogram,
       {"direction", "transport", "wire"}},
      {"hy_reshard_phase_seconds", MetricType::kHistogram, {"phase"}},
      {"hy_reshard_bytes_total", MetricType::kCounter, {"kind"}},
      {"hy_checkpoint_save_duration_seconds", MetricType::kHistogram, {}},
      {"hy_checkpoint_commit_duration_seconds", MetricType::kHistogram, {}},
      {"hy_checkpoint_written_bytes_total", MetricType::kCounter, {}},
      {"hy_checkpoint_logical_bytes_total", MetricType::kCounter, {}},
      {"hy_checkpoint_last_committed_step", MetricType::kGauge, {}},
      {"hy_recovery_duration_seconds", MetricType::kHistogram, {"phase"}},
      {"hy_recoveries_total", MetricType::kCounter, {}},
      {"hy_ppo_reward_mean", MetricType::kGauge, {}},
      {"hy_ppo_kl", MetricType::kGauge, {}},
      {"hy_ppo_policy_loss", MetricType::kGauge, {}},
      {"hy_ppo_value_loss", MetricType::kGauge, {}},
      {"hy_ppo_tokens_per_second", MetricType::kGauge, {}},
      {"hy_build_info", MetricType::kGauge, {"version"}},
  };
  auto specs = Specs(r);
  EXPECT_EQ(specs.size(), std::size(wants));
  for (const Want& w : wants) {
    ASSERT_EQ(specs.count(w.name), 1u) << w.name;
    const FamilySpec& s = specs[w.name];
    EXPECT_EQ(s.type, w.type) << w.name;
    EXPECT_EQ(std::set<std::string>(s.label_names.begin(), s.label_names.end()),
              w.labels)
        << w.name;
  }
}

TEST(HyMetricsTest, NamingConventions) {
  Registry r;
  ASSERT_TRUE(HyMetrics::Register(r).ok());
  ASSERT_TRUE(RegisterExporterMetrics(r).ok());
  // Labels that would explode cardinality or name a single step or tensor.
  const std::set<std::string> forbidden = {
      "step", "iteration", "tensor", "rank", "shard", "chunk", "version_id"};
  for (const FamilySpec& s : r.Describe()) {
    EXPECT_EQ(s.name.rfind("hy_", 0), 0u) << s.name;
    EXPECT_EQ(s.type == MetricType::kCounter, EndsWith(s.name, "_total"))
        << s.name;
    if (s.type == MetricType::kHistogram) {
      EXPECT_TRUE(EndsWith(s.name, "_seconds")) << s.name << ": base unit";
    }
    for (const char* unit :
         {"_ms", "_milliseconds", "_kb", "_mb", "_minutes"}) {
      EXPECT_EQ(s.name.find(unit), std::string::npos) << s.name;
    }
    for (const std::string& label : s.label_names) {
      EXPECT_EQ(forbidden.count(label), 0u) << s.name << " " << label;
    }
    EXPECT_TRUE(s.const_labels.empty()) << s.name;
  }
}

TEST(HyMetricsTest, ClosedLabelSetsArePrecreatedAtZero) {
  Registry r;
  auto m = HyMetrics::Register(r);
  ASSERT_TRUE(m.ok());
  std::map<std::string, MetricFamilySnapshot> families;
  for (auto& f : r.Collect()) families[f.name] = f;
  EXPECT_EQ(families["hy_reshard_phase_seconds"].metrics.size(), 4u);
  EXPECT_EQ(families["hy_reshard_bytes_total"].metrics.size(), 3u);
  EXPECT_EQ(families["hy_recovery_duration_seconds"].metrics.size(), 6u);
  EXPECT_EQ(families["hy_reshard_duration_seconds"].metrics.size(), 0u);
  ASSERT_EQ(families["hy_build_info"].metrics.size(), 1u);
  EXPECT_EQ(families["hy_build_info"].metrics[0].value, 1);
  EXPECT_EQ(families["hy_build_info"].metrics[0].labels.at("version"),
            std::string(HyVersion()));
  std::set<std::string> phases;
  for (const auto& s : families["hy_reshard_phase_seconds"].metrics) {
    phases.insert(s.labels.at("phase"));
  }
  EXPECT_EQ(phases,
            (std::set<std::string>{"plan", "pack", "transfer", "unpack"}));
  std::set<std::string> kinds;
  for (const auto& s : families["hy_reshard_bytes_total"].metrics) {
    kinds.insert(s.labels.at("kind"));
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"local", "node", "remote"}));
}

TEST(HyMetricsTest, AccessorsPointAtTheRightSeries) {
  Registry r;
  auto m = HyMetrics::Register(r);
  ASSERT_TRUE(m.ok());
  m->reshard_bytes(ReshardBytesKind::kRemote)->Increment(7);
  m->reshard_phase(ReshardPhase::kTransfer)->Observe(0.25);
  m->recovery_duration(RecoveryPhase::kReplicate)->Observe(3);
  auto d =
      m->ReshardDuration(ReshardDirection::kTrainToRollout,
                         ReshardTransport::kNccl, ReshardWire::kSparseDelta);
  ASSERT_TRUE(d.ok());
  (*d)->Observe(0.002);
  auto again =
      m->ReshardDuration(ReshardDirection::kTrainToRollout,
                         ReshardTransport::kNccl, ReshardWire::kSparseDelta);
  EXPECT_EQ(*d, *again);
  for (const auto& f : r.Collect()) {
    for (const auto& s : f.metrics) {
      if (f.name == "hy_reshard_bytes_total") {
        EXPECT_EQ(s.value, s.labels.at("kind") == "remote" ? 7 : 0);
      } else if (f.name == "hy_reshard_phase_seconds") {
        EXPECT_EQ(s.count, s.labels.at("phase") == "transfer" ? 1u : 0u);
      } else if (f.name == "hy_recovery_duration_seconds") {
        EXPECT_EQ(s.count, s.labels.at("phase") == "replicate" ? 1u : 0u);
      } else if (f.name == "hy_reshard_duration_seconds") {
        EXPECT_EQ(s.labels, (Labels{{"direction", "train_to_rollout"},
                                    {"transport", "nccl"},
                                    {"wire", "sparse_delta"}}));
        EXPECT_EQ(s.count, 1u);
      }
    }
  }
}

TEST(HyMetricsTest, RegisteringTwiceIsIdempotent) {
  Registry r;
  auto a = HyMetrics::Register(r);
  auto b = HyMetrics::Register(r);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->recoveries, b->recoveries);
  EXPECT_EQ(a->reshard_bytes(ReshardBytesKind::kLocal),
            b->reshard_bytes(ReshardBytesKind::kLocal));
  EXPECT_EQ(r.size(), 16u);
}

TEST(HyMetricsTest, ConflictingRegistrationFails) {
  Registry r;
  ASSERT_TRUE(BuildGauge().Name("hy_ppo_kl").Help("Other.").Register(r).ok());
  EXPECT_EQ(HyMetrics::Register(r).status().code(), StatusCode::kAlreadyExists);
}

TEST(HyMetricsTest, BucketsResolveOneMillisecondToOneMinute) {
  BucketBoundaries s = ShortDurationBuckets();
  EXPECT_TRUE(ValidateBuckets(s).ok());
  EXPECT_EQ(s.front(), 0.001);
  EXPECT_EQ(s.back(), 60);
  for (size_t i = 1; i < s.size(); ++i) {
    EXPECT_LE(s[i] / s[i - 1], 2.5 + 1e-9) << "gap at " << s[i];
  }
  BucketBoundaries l = LongDurationBuckets();
  EXPECT_TRUE(ValidateBuckets(l).ok());
  EXPECT_EQ(l.front(), 0.01);
  EXPECT_EQ(l.back(), 600);
  Registry r;
  ASSERT_TRUE(HyMetrics::Register(r).ok());
  auto specs = Specs(r);
  EXPECT_EQ(specs["hy_reshard_duration_seconds"].buckets, s);
  EXPECT_EQ(specs["hy_reshard_phase_seconds"].buckets, s);
  EXPECT_EQ(specs["hy_checkpoint_commit_duration_seconds"].buckets, s);
  EXPECT_EQ(specs["hy_checkpoint_save_duration_seconds"].buckets, l);
  EXPECT_EQ(specs["hy_recovery_duration_seconds"].buckets, l);
}

TEST(HyMetricsTest, LabelValues) {
  EXPECT_EQ(LabelValue(ReshardDirection::kRolloutToTrain), "rollout_to_train");
  EXPECT_EQ(LabelValue(ReshardTransport::kGloo), "gloo");
  EXPECT_EQ(LabelValue(ReshardWire::kBf16), "bf16");
  EXPECT_EQ(LabelValue(ReshardPhase::kUnpack), "unpack");
  EXPECT_EQ(LabelValue(ReshardBytesKind::kNode), "node");
  EXPECT_EQ(LabelValue(RecoveryPhase::kDetect), "detect");
  EXPECT_FALSE(HyVersion().empty());
}

TEST(HyMetricsTest, EveryMetricIsDocumented) {
  std::string doc = testing::ReadFile(HY_METRICS_DOC_PATH);
  ASSERT_FALSE(doc.empty()) << "cannot read " << HY_METRICS_DOC_PATH;
  Registry r;
  ASSERT_TRUE(HyMetrics::Register(r).ok());
  ASSERT_TRUE(RegisterExporterMetrics(r).ok());
  for (const FamilySpec& s : r.Describe()) {
    // One table row per metric: | `name` | type | labels | meaning |
    std::string row =
        "| `" + s.name + "` | " + std::string(MetricTypeName(s.type)) + " |";
    EXPECT_NE(doc.find(row), std::string::npos)
        << "docs/metrics.md has no row starting \"" << row << "\"";
    for (const std::string& label : s.label_names) {
      EXPECT_NE(doc.find("`" + label + "`"), std::string::npos)
          << s.name << " label " << label;
    }
  }
}

}  // namespace
}  // namespace hy::metrics
