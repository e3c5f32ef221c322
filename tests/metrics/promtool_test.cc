// `promtool check metrics` (the real one, from the Debian prometheus package)
// on what hy writes, and `promtool check config` on the test configuration.

#include <gtest/gtest.h>

#include <cmath>

#include <prometheus/text_serializer.h>

#include <limits>

#include "hy/metrics/exporter.h"
#include "hy/metrics/hy_metrics.h"
#include "servers.h"

namespace hy::metrics {
namespace {

using testing::FindExecutable;
using testing::MissingBinaryMessage;

class PromtoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    promtool_ = FindExecutable("promtool");
    ASSERT_FALSE(promtool_.empty())
        << MissingBinaryMessage("promtool", "prometheus");
  }

  // Runs `promtool check metrics` on `text`; expects a clean pass.
  void ExpectClean(const std::string& text) {
    auto r = testing::RunProcess({promtool_, "check", "metrics"}, text, 30000);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->timed_out);
    EXPECT_EQ(r->exit_code, 0) << r->out << r->err << "\ninput:\n" << text;
    EXPECT_EQ(r->out + r->err, "") << "promtool complained";
  }

  static std::string Text(const Registry& r) {
    return prometheus::TextSerializer().Serialize(r.Collect());
  }

  std::string promtool_;
};

TEST_F(PromtoolTest, EveryHyMetricAtZero) {
  Registry r;
  ASSERT_TRUE(HyMetrics::Register(r).ok());
  ExpectClean(Text(r));
}

TEST_F(PromtoolTest, EveryHyMetricWithValues) {
  Registry r;
  auto m = HyMetrics::Register(r);
  ASSERT_TRUE(m.ok());
  for (int d = 0; d < static_cast<int>(ReshardDirection::kCount); ++d) {
    for (int t = 0; t < static_cast<int>(ReshardTransport::kCount); ++t) {
      for (int w = 0; w < static_cast<int>(ReshardWire::kCount); ++w) {
        auto h = m->ReshardDuration(static_cast<ReshardDirection>(d),
                                    static_cast<ReshardTransport>(t),
                                    static_cast<ReshardWire>(w));
        ASSERT_TRUE(h.ok());
        (*h)->Observe(0.001 * (d + 1) * (t + 1) * (w + 1));
      }
    }
  }
  m->reshard_phase(ReshardPhase::kTransfer)->Observe(0.3);
  m->reshard_bytes(ReshardBytesKind::kRemote)->Increment(1e12);
  m->reshard_logical_bytes->Increment(4e9);
  m->reshard_wire_bytes(ReshardWire::kDelta)->Increment(1e8);
  m->checkpoint_blocking->Observe(0.7);
  m->checkpoint_last_replicated_step->Set(1100);
  m->replication_lag_steps->Set(100);
  m->iteration_duration->Observe(3.5);
  m->restarts(RestartCause::kNodeLost)->Increment();
  for (int peer = 0; peer < 4; ++peer) {
    auto age = m->PeerHeartbeatAge(peer);
    ASSERT_TRUE(age.ok());
    (*age)->Set(0.25 * peer);
  }
  m->checkpoint_save_duration->Observe(12.5);
  m->checkpoint_commit_duration->Observe(0.02);
  m->checkpoint_written_bytes->Increment(3.5e9);
  m->checkpoint_logical_bytes->Increment(14e9);
  m->checkpoint_last_committed_step->Set(1200);
  m->recovery_duration(RecoveryPhase::kRead)->Observe(2);
  m->recoveries(RestartCause::kProcessExit)->Increment();
  m->ppo_reward_mean->Set(-0.25);
  m->ppo_kl->Set(std::nan(""));
  m->ppo_policy_loss->Set(1e-7);
  m->ppo_value_loss->Set(std::numeric_limits<double>::infinity());
  m->ppo_tokens_per_second->Set(123456.789);
  ExpectClean(Text(r));
}

TEST_F(PromtoolTest, ExporterResponse) {
  auto registry = std::make_shared<Registry>();
  ASSERT_TRUE(HyMetrics::Register(*registry).ok());
  auto e = Exporter::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(e.ok()) << e.status();
  // Twice: the second response also carries the exposer's own figures.
  for (int i = 0; i < 2; ++i) {
    auto r = testing::HttpGet((*e)->port(), "/metrics");
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, 200);
    EXPECT_NE(r->body.find("exposer_scrapes_total"), std::string::npos);
    ExpectClean(r->body);
  }
}

TEST_F(PromtoolTest, CatchesBrokenInput) {
  // Negative control: promtool does check what it is given.
  auto r = testing::RunProcess({promtool_, "check", "metrics"},
                               "# HELP x X.\n# TYPE x counter\nx 1\n", 30000);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->exit_code, 0);
  EXPECT_NE((r->out + r->err).find("_total"), std::string::npos)
      << r->out << r->err;
}

TEST_F(PromtoolTest, GeneratedPrometheusConfig) {
  testing::TempDir dir;
  std::string path = dir.path() + "/prometheus.yml";
  ASSERT_TRUE(testing::WriteFile(
                  path, testing::PrometheusServer::Config(
                            {{"hy", 9999, false, ""},
                             {"pushgateway", 9998, true, ""},
                             {"ranks", 0, false, dir.path() + "/t.json"}}))
                  .ok());
  auto r = testing::RunProcess({promtool_, "check", "config", path}, "", 30000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
}

}  // namespace
}  // namespace hy::metrics
