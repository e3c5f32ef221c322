// `promtool check metrics` (the real one, from the Debian prometheus package)
// on what hy writes, and `promtool check config` on the test configuration.

#include <gtest/gtest.h>

#include <cmath>

#include "hy/metrics/exposer.h"
#include "hy/metrics/hy_metrics.h"
#include "hy/metrics/text_format.h"
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

  std::string promtool_;
};

TEST_F(PromtoolTest, EveryHyMetricAtZero) {
  Registry r;
  ASSERT_TRUE(HyMetrics::Register(r).ok());
  ASSERT_TRUE(RegisterExporterMetrics(r).ok());
  ExpectClean(SerializeText(r.Collect()));
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
  m->checkpoint_save_duration->Observe(12.5);
  m->checkpoint_commit_duration->Observe(0.02);
  m->checkpoint_written_bytes->Increment(3.5e9);
  m->checkpoint_logical_bytes->Increment(14e9);
  m->checkpoint_last_committed_step->Set(1200);
  m->recovery_duration(RecoveryPhase::kRead)->Observe(2);
  m->recoveries->Increment();
  m->ppo_reward_mean->Set(-0.25);
  m->ppo_kl->Set(std::nan(""));
  m->ppo_policy_loss->Set(1e-7);
  m->ppo_value_loss->Set(std::numeric_limits<double>::infinity());
  m->ppo_tokens_per_second->Set(123456.789);
  ExpectClean(SerializeText(r.Collect()));
}

TEST_F(PromtoolTest, EscapedLabelValuesAndHelp) {
  Registry r;
  auto f = BuildCounter()
               .Name("hy_test_odd_total")
               .Help("Help with \\ backslash\nand a second line.")
               .LabelNames({"v"})
               .Register(r);
  ASSERT_TRUE(f.ok());
  for (const char* v : {"quote\"d", "back\\slash", "new\nline",
                        "\xC3\xBC\xE2\x82\xAC", "{braces},=", " "}) {
    (*(*f)->Add({{"v", v}}))->Increment();
  }
  ExpectClean(SerializeText(r.Collect()));
}

TEST_F(PromtoolTest, ExporterResponse) {
  auto e = Exposer::Start();
  ASSERT_TRUE(e.ok());
  auto registry = std::make_shared<Registry>();
  ASSERT_TRUE(HyMetrics::Register(*registry).ok());
  (*e)->RegisterCollectable(registry);
  auto r = testing::HttpGet((*e)->port(), "/metrics");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200);
  ExpectClean(r->body);
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
                            {{"hy", 9999, false}, {"pushgateway", 9998, true}}))
                  .ok());
  auto r = testing::RunProcess({promtool_, "check", "config", path}, "", 30000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
}

}  // namespace
}  // namespace hy::metrics
