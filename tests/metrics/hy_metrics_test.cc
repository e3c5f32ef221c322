// The catalogue of hy's metrics: every metric the design asks for exists with
// the right type, labels and buckets, follows the naming rules, is
// registered on a prometheus::Registry as catalogued, and is documented in
// docs/metrics.md.

#include "hy/metrics/hy_metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "subprocess.h"

namespace hy::metrics {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::map<std::string, FamilyDef> Defs() {
  std::map<std::string, FamilyDef> out;
  for (const FamilyDef& d : Catalogue()) out[d.name] = d;
  return out;
}

std::map<std::string, prometheus::MetricFamily> Collected(const Registry& r) {
  std::map<std::string, prometheus::MetricFamily> out;
  for (auto& f : r.Collect()) out[f.name] = f;
  return out;
}

// Families whose series are made on first use; prometheus-cpp leaves a
// family without series out of Collect().
const std::set<std::string> kOnFirstUse = {"hy_reshard_duration_seconds",
                                           "hy_peer_heartbeat_age_seconds"};

std::string Label(const prometheus::ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label) {
    if (l.name == name) return l.value;
  }
  return "";
}

TEST(HyMetricsTest, EveryRequiredMetricWithTypeAndLabels) {
  struct Want {
    const char* name;
    MetricType type;
    std::vector<std::string> labels;
  };
  const Want wants[] = {
      {"hy_reshard_duration_seconds",
       MetricType::kHistogram,
       {"direction", "transport", "wire"}},
      {"hy_reshard_phase_seconds", MetricType::kHistogram, {"phase"}},
      {"hy_reshard_bytes_total", MetricType::kCounter, {"kind"}},
      {"hy_reshard_logical_bytes_total", MetricType::kCounter, {}},
      {"hy_reshard_wire_bytes_total", MetricType::kCounter, {"wire"}},
      {"hy_checkpoint_save_duration_seconds", MetricType::kHistogram, {}},
      {"hy_checkpoint_commit_duration_seconds", MetricType::kHistogram, {}},
      {"hy_checkpoint_blocking_seconds", MetricType::kHistogram, {}},
      {"hy_checkpoint_written_bytes_total", MetricType::kCounter, {}},
      {"hy_checkpoint_logical_bytes_total", MetricType::kCounter, {}},
      {"hy_checkpoint_last_committed_step", MetricType::kGauge, {}},
      {"hy_checkpoint_last_replicated_step", MetricType::kGauge, {}},
      {"hy_replication_lag_steps", MetricType::kGauge, {}},
      {"hy_checkpoint_failures_total", MetricType::kCounter, {"cause"}},
      {"hy_damaged_chunks_total", MetricType::kCounter, {}},
      {"hy_peer_heartbeat_age_seconds", MetricType::kGauge, {"peer"}},
      {"hy_recovery_duration_seconds", MetricType::kHistogram, {"phase"}},
      {"hy_recoveries_total", MetricType::kCounter, {"cause"}},
      {"hy_restarts_total", MetricType::kCounter, {"cause"}},
      {"hy_iteration_duration_seconds", MetricType::kHistogram, {}},
      {"hy_rollout_weight_sync_seconds", MetricType::kHistogram, {}},
      {"hy_rollout_weight_sync_bytes_total", MetricType::kCounter, {}},
      {"hy_rollout_engine_restarts_total", MetricType::kCounter, {}},
      {"hy_rollout_weight_version", MetricType::kGauge, {}},
      {"hy_ppo_reward_mean", MetricType::kGauge, {}},
      {"hy_ppo_kl", MetricType::kGauge, {}},
      {"hy_ppo_policy_loss", MetricType::kGauge, {}},
      {"hy_ppo_value_loss", MetricType::kGauge, {}},
      {"hy_ppo_tokens_per_second", MetricType::kGauge, {}},
      {"hy_ppo_entropy", MetricType::kGauge, {}},
      {"hy_ppo_exact_match", MetricType::kGauge, {}},
      {"hy_ppo_grad_norm", MetricType::kGauge, {}},
      {"hy_ppo_iteration", MetricType::kGauge, {}},
      {"hy_validation_exact_match", MetricType::kGauge, {}},
      {"hy_build_info", MetricType::kGauge, {"version"}},
  };
  auto defs = Defs();
  EXPECT_EQ(defs.size(), std::size(wants));
  EXPECT_EQ(Catalogue().size(), std::size(wants));  // Names are distinct.
  for (const Want& w : wants) {
    ASSERT_EQ(defs.count(w.name), 1u) << w.name;
    EXPECT_EQ(defs[w.name].type, w.type) << w.name;
    EXPECT_EQ(defs[w.name].label_names, w.labels) << w.name;
  }
}

// Before any commit the step gauges say "none" (-1), not step 0.
TEST(HyMetricsTest, StepGaugesStartAtMinusOne) {
  Registry r;
  Result<HyMetrics> m = HyMetrics::Register(r);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->checkpoint_last_committed_step->Value(), -1.0);
  EXPECT_EQ(m->checkpoint_last_replicated_step->Value(), -1.0);
  // Registering again (another module of the process) keeps the values.
  m->checkpoint_last_committed_step->Set(12);
  Result<HyMetrics> again = HyMetrics::Register(r);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->checkpoint_last_committed_step->Value(), 12.0);
  EXPECT_EQ(again->checkpoint_last_replicated_step->Value(), -1.0);
}

// The held-out rate reads -1 until a validation sets it; the iteration 0.
TEST(HyMetricsTest, ValidationGaugeStartsAtMinusOne) {
  Registry r;
  Result<HyMetrics> m = HyMetrics::Register(r);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->validation_exact_match->Value(), -1.0);
  EXPECT_EQ(m->ppo_iteration->Value(), 0.0);
  m->validation_exact_match->Set(0.25);
  Result<HyMetrics> again = HyMetrics::Register(r);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->validation_exact_match->Value(), 0.25);
}

TEST(HyMetricsTest, RegisteredAsCatalogued) {
  Registry r;
  ASSERT_TRUE(HyMetrics::Register(r).ok());
  auto families = Collected(r);
  EXPECT_EQ(families.size(), Catalogue().size() - kOnFirstUse.size());
  for (const FamilyDef& d : Catalogue()) {
    if (kOnFirstUse.count(d.name) != 0) {
      EXPECT_EQ(families.count(d.name), 0u) << d.name;
      continue;
    }
    ASSERT_EQ(families.count(d.name), 1u) << d.name;
    const prometheus::MetricFamily& f = families[d.name];
    EXPECT_EQ(f.help, d.help) << d.name;
    const prometheus::MetricType want =
        d.type == MetricType::kCounter ? prometheus::MetricType::Counter
        : d.type == MetricType::kGauge ? prometheus::MetricType::Gauge
                                       : prometheus::MetricType::Histogram;
    EXPECT_EQ(f.type, want) << d.name;
    for (const auto& m : f.metric) {
      std::set<std::string> names;
      for (const auto& l : m.label) names.insert(l.name);
      EXPECT_EQ(names, std::set<std::string>(d.label_names.begin(),
                                             d.label_names.end()))
          << d.name;
      if (d.type == MetricType::kHistogram) {
        ASSERT_EQ(m.histogram.bucket.size(), d.buckets.size() + 1) << d.name;
        for (size_t i = 0; i < d.buckets.size(); ++i) {
          EXPECT_EQ(m.histogram.bucket[i].upper_bound, d.buckets[i]);
        }
      }
    }
  }
}

TEST(HyMetricsTest, NamingConventions) {
  // Labels that would explode cardinality or name a single step or tensor.
  // (The rank and node come from the scrape target, not from the metrics.)
  const std::set<std::string> forbidden = {"step",  "iteration", "tensor",
                                           "rank",  "node",      "shard",
                                           "chunk", "version_id"};
  for (const FamilyDef& d : Catalogue()) {
    EXPECT_EQ(d.name.rfind("hy_", 0), 0u) << d.name;
    EXPECT_EQ(d.type == MetricType::kCounter, EndsWith(d.name, "_total"))
        << d.name;
    if (d.type == MetricType::kHistogram) {
      EXPECT_TRUE(EndsWith(d.name, "_seconds")) << d.name << ": base unit";
    } else {
      EXPECT_TRUE(d.buckets.empty()) << d.name;
    }
    for (const char* unit :
         {"_ms", "_milliseconds", "_kb", "_mb", "_minutes"}) {
      EXPECT_EQ(d.name.find(unit), std::string::npos) << d.name;
    }
    for (const std::string& label : d.label_names) {
      EXPECT_EQ(forbidden.count(label), 0u) << d.name << " " << label;
    }
    EXPECT_FALSE(d.help.empty()) << d.name;
  }
}

TEST(HyMetricsTest, ClosedLabelSetsArePrecreatedAtZero) {
  Registry r;
  auto m = HyMetrics::Register(r);
  ASSERT_TRUE(m.ok());
  auto families = Collected(r);
  EXPECT_EQ(families["hy_reshard_phase_seconds"].metric.size(), 4u);
  EXPECT_EQ(families["hy_reshard_bytes_total"].metric.size(), 3u);
  EXPECT_EQ(families["hy_reshard_wire_bytes_total"].metric.size(), 3u);
  EXPECT_EQ(families["hy_recovery_duration_seconds"].metric.size(), 6u);
  EXPECT_EQ(families["hy_recoveries_total"].metric.size(), 2u);
  EXPECT_EQ(families["hy_restarts_total"].metric.size(), 2u);
  EXPECT_EQ(families["hy_reshard_duration_seconds"].metric.size(), 0u);
  EXPECT_EQ(families["hy_peer_heartbeat_age_seconds"].metric.size(), 0u);
  ASSERT_EQ(families["hy_build_info"].metric.size(), 1u);
  EXPECT_EQ(families["hy_build_info"].metric[0].gauge.value, 1);
  EXPECT_EQ(Label(families["hy_build_info"].metric[0], "version"),
            std::string(HyVersion()));
  std::set<std::string> wires;
  for (const auto& s : families["hy_reshard_wire_bytes_total"].metric) {
    wires.insert(Label(s, "wire"));
  }
  EXPECT_EQ(wires, (std::set<std::string>{"raw", "bf16", "delta"}));
  std::set<std::string> causes;
  for (const auto& s : families["hy_restarts_total"].metric) {
    causes.insert(Label(s, "cause"));
  }
  EXPECT_EQ(causes, (std::set<std::string>{"process_exit", "node_lost"}));
}

TEST(HyMetricsTest, AccessorsPointAtTheRightSeries) {
  Registry r;
  auto m = HyMetrics::Register(r);
  ASSERT_TRUE(m.ok());
  m->reshard_bytes(ReshardBytesKind::kRemote)->Increment(7);
  m->reshard_wire_bytes(ReshardWire::kDelta)->Increment(3);
  m->reshard_phase(ReshardPhase::kTransfer)->Observe(0.25);
  m->recovery_duration(RecoveryPhase::kReplicate)->Observe(3);
  m->restarts(RestartCause::kNodeLost)->Increment();
  auto d = m->ReshardDuration(ReshardDirection::kTrainToRollout,
                              ReshardTransport::kNccl, ReshardWire::kDelta);
  ASSERT_TRUE(d.ok());
  (*d)->Observe(0.002);
  auto again = m->ReshardDuration(ReshardDirection::kTrainToRollout,
                                  ReshardTransport::kNccl, ReshardWire::kDelta);
  EXPECT_EQ(*d, *again);
  auto age = m->PeerHeartbeatAge(3);
  ASSERT_TRUE(age.ok());
  (*age)->Set(1.5);
  EXPECT_EQ(Count(**d), 1u);
  EXPECT_DOUBLE_EQ(Sum(**d), 0.002);
  for (const auto& f : r.Collect()) {
    for (const auto& s : f.metric) {
      if (f.name == "hy_reshard_bytes_total") {
        EXPECT_EQ(s.counter.value, Label(s, "kind") == "remote" ? 7 : 0);
      } else if (f.name == "hy_reshard_wire_bytes_total") {
        EXPECT_EQ(s.counter.value, Label(s, "wire") == "delta" ? 3 : 0);
      } else if (f.name == "hy_restarts_total") {
        EXPECT_EQ(s.counter.value, Label(s, "cause") == "node_lost" ? 1 : 0);
      } else if (f.name == "hy_reshard_phase_seconds") {
        EXPECT_EQ(s.histogram.sample_count,
                  Label(s, "phase") == "transfer" ? 1u : 0u);
      } else if (f.name == "hy_recovery_duration_seconds") {
        EXPECT_EQ(s.histogram.sample_count,
                  Label(s, "phase") == "replicate" ? 1u : 0u);
      } else if (f.name == "hy_reshard_duration_seconds") {
        EXPECT_EQ(Label(s, "direction"), "train_to_rollout");
        EXPECT_EQ(Label(s, "transport"), "nccl");
        EXPECT_EQ(Label(s, "wire"), "delta");
        EXPECT_EQ(s.histogram.sample_count, 1u);
      } else if (f.name == "hy_peer_heartbeat_age_seconds") {
        EXPECT_EQ(Label(s, "peer"), "3");
        EXPECT_EQ(s.gauge.value, 1.5);
      }
    }
  }
}

TEST(HyMetricsTest, RegisteringTwiceIsIdempotent) {
  Registry r;
  auto a = HyMetrics::Register(r);
  auto b = HyMetrics::Register(r);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->recoveries(RestartCause::kNodeLost),
            b->recoveries(RestartCause::kNodeLost));
  EXPECT_EQ(a->reshard_bytes(ReshardBytesKind::kLocal),
            b->reshard_bytes(ReshardBytesKind::kLocal));
  EXPECT_EQ(a->iteration_duration, b->iteration_duration);
  EXPECT_EQ(r.Collect().size(), Catalogue().size() - kOnFirstUse.size());
}

TEST(HyMetricsTest, ConflictingRegistrationFails) {
  Registry r;
  // prometheus-cpp throws on a name taken by another type; hy returns it.
  prometheus::BuildCounter().Name("hy_ppo_kl").Help("Other.").Register(r);
  EXPECT_EQ(HyMetrics::Register(r).status().code(), StatusCode::kAlreadyExists);
}

TEST(HyMetricsTest, BucketsResolveOneMillisecondToOneMinute) {
  BucketBoundaries s = ShortDurationBuckets();
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  EXPECT_EQ(s.front(), 0.001);
  EXPECT_EQ(s.back(), 60);
  for (size_t i = 1; i < s.size(); ++i) {
    EXPECT_LE(s[i] / s[i - 1], 2.5 + 1e-9) << "gap at " << s[i];
  }
  BucketBoundaries l = LongDurationBuckets();
  EXPECT_TRUE(std::is_sorted(l.begin(), l.end()));
  EXPECT_EQ(l.front(), 0.01);
  EXPECT_EQ(l.back(), 600);
  auto defs = Defs();
  EXPECT_EQ(defs["hy_reshard_duration_seconds"].buckets, s);
  EXPECT_EQ(defs["hy_reshard_phase_seconds"].buckets, s);
  EXPECT_EQ(defs["hy_checkpoint_commit_duration_seconds"].buckets, s);
  EXPECT_EQ(defs["hy_checkpoint_save_duration_seconds"].buckets, l);
  EXPECT_EQ(defs["hy_recovery_duration_seconds"].buckets, l);
  EXPECT_EQ(defs["hy_iteration_duration_seconds"].buckets, l);
}

TEST(HyMetricsTest, LabelValues) {
  EXPECT_EQ(LabelValue(ReshardDirection::kRolloutToTrain), "rollout_to_train");
  EXPECT_EQ(LabelValue(ReshardTransport::kGloo), "gloo");
  EXPECT_EQ(LabelValue(ReshardWire::kBf16), "bf16");
  EXPECT_EQ(LabelValue(ReshardWire::kDelta), "delta");
  EXPECT_EQ(LabelValue(ReshardPhase::kUnpack), "unpack");
  EXPECT_EQ(LabelValue(ReshardBytesKind::kNode), "node");
  EXPECT_EQ(LabelValue(RecoveryPhase::kDetect), "detect");
  EXPECT_EQ(LabelValue(RestartCause::kNodeLost), "node_lost");
  EXPECT_EQ(*ParseRestartCause("process_exit"), RestartCause::kProcessExit);
  EXPECT_TRUE(ParseRestartCause("oom").status().IsInvalidArgument());
  EXPECT_FALSE(HyVersion().empty());
}

TEST(HyMetricsTest, EveryMetricIsDocumented) {
  std::string doc = testing::ReadFile(HY_METRICS_DOC_PATH);
  ASSERT_FALSE(doc.empty()) << "cannot read " << HY_METRICS_DOC_PATH;
  for (const FamilyDef& d : Catalogue()) {
    // One table row per metric: | `name` | type | labels | meaning |
    std::string row =
        "| `" + d.name + "` | " + std::string(MetricTypeName(d.type)) + " |";
    EXPECT_NE(doc.find(row), std::string::npos)
        << "docs/metrics.md has no row starting \"" << row << "\"";
    for (const std::string& label : d.label_names) {
      EXPECT_NE(doc.find("`" + label + "`"), std::string::npos)
          << d.name << " label " << label;
    }
  }
}

}  // namespace
}  // namespace hy::metrics
