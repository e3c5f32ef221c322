// Integration with a real Prometheus server (Debian prometheus package): it
// scrapes an Exporter and a real Pushgateway fed by a Pusher, and scrapes
// four ranks' exporters found through the file_sd JSON, running every
// expression of the Grafana dashboard through /api/v1/query.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <iostream>
#include <thread>

#include <set>

#include "hy/metrics/exporter.h"
#include "hy/metrics/file_sd.h"
#include "hy/metrics/hy_metrics.h"
#include "hy/metrics/pusher.h"
#include "promql.h"
#include "servers.h"

namespace hy::metrics {
namespace {

using nlohmann::json;
using testing::FindExecutable;
using testing::MissingBinaryMessage;
using testing::PrometheusServer;
using testing::PushgatewayServer;
using testing::TempDir;

// The value of the only sample of an instant query, or NaN.
double OnlyValue(const json& response) {
  const json& result = response["data"]["result"];
  if (result.size() != 1) return std::nan("");
  return std::stod(result[0]["value"][1].get<std::string>());
}

// Bounded waits for Prometheus to scrape. They end as soon as the data is
// there (normally within a few seconds); the deadlines leave room for a
// loaded 2-core CI machine running other tests at the same time.
constexpr int kScrapeDeadlineMs = 60000;

std::string RequireBinary(const std::string& name, const std::string& pkg) {
  std::string path = FindExecutable(name);
  EXPECT_FALSE(path.empty()) << MissingBinaryMessage(name, pkg);
  return path;
}

TEST(PrometheusTest, ScrapesExporterAndPushgateway) {
  std::string prometheus = RequireBinary("prometheus", "prometheus");
  std::string pushgateway =
      RequireBinary("prometheus-pushgateway", "prometheus-pushgateway");
  ASSERT_FALSE(prometheus.empty() || pushgateway.empty());
  TempDir dir;

  // A training process's registry, served by the Exposer.
  auto registry = std::make_shared<Registry>();
  auto m = HyMetrics::Register(*registry);
  ASSERT_TRUE(m.ok());
  m->reshard_bytes(ReshardBytesKind::kRemote)->Increment(4096);
  m->checkpoint_last_committed_step->Set(1234);
  m->recoveries(RestartCause::kNodeLost)->Increment(2);
  m->ppo_kl->Set(0.125);
  Histogram* reshard =
      *m->ReshardDuration(ReshardDirection::kTrainToRollout,
                          ReshardTransport::kGloo, ReshardWire::kBf16);
  for (double s : {0.0005, 0.003, 0.04, 0.5, 75.0}) reshard->Observe(s);
  auto exposer = Exporter::Start("127.0.0.1", 0, registry);
  ASSERT_TRUE(exposer.ok()) << exposer.status();

  // A short job's metrics, pushed through the Pushgateway.
  auto pg = PushgatewayServer::Start(pushgateway, dir.path());
  ASSERT_TRUE(pg.ok()) << pg.status();
  auto job_registry = std::make_shared<Registry>();
  auto jm = HyMetrics::Register(*job_registry);
  ASSERT_TRUE(jm.ok());
  jm->reshard_bytes(ReshardBytesKind::kRemote)->Increment(777);
  auto gateway = Pusher::Create("127.0.0.1:" + std::to_string((*pg)->port()),
                                 "hyctl_train", {{"run", "a"}, {"rank", "3"}},
                                 job_registry);
  ASSERT_TRUE(gateway.ok()) << gateway.status();
  ASSERT_TRUE((*gateway)->Push().ok()) << (*pg)->LogTail();

  auto server = PrometheusServer::Start(prometheus, dir.path(),
                                        {{"hy", (*exposer)->port(), false, ""},
                                         {"pushgateway", (*pg)->port(), true,
                                          ""}});
  ASSERT_TRUE(server.ok()) << server.status();
  PrometheusServer& p = **server;

  auto up = p.WaitForResult("up{job=\"hy\"} == 1", kScrapeDeadlineMs);
  ASSERT_TRUE(up.ok()) << up.status();
  ASSERT_FALSE((*up)["data"]["result"].empty())
      << "Prometheus never scraped the exporter:\n"
      << p.LogTail();
  auto pushed = p.WaitForResult(
      "hy_reshard_bytes_total{job=\"hyctl_train\",kind=\"remote\"}",
      kScrapeDeadlineMs);
  ASSERT_TRUE(pushed.ok());
  ASSERT_EQ((*pushed)["data"]["result"].size(), 1u) << pushed->dump();

  auto value = [&](const std::string& expr) {
    auto r = p.Query(expr);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return std::nan("");
    EXPECT_EQ((*r)["status"], "success") << expr << ": " << r->dump();
    return OnlyValue(*r);
  };
  EXPECT_EQ(value("hy_checkpoint_last_committed_step{job=\"hy\"}"), 1234);
  EXPECT_EQ(value("hy_reshard_bytes_total{job=\"hy\",kind=\"remote\"}"), 4096);
  EXPECT_EQ(value("count(hy_reshard_bytes_total{job=\"hy\"})"), 3);
  EXPECT_EQ(value("hy_recoveries_total{job=\"hy\",cause=\"node_lost\"}"), 2);
  EXPECT_EQ(value("hy_ppo_kl{job=\"hy\"}"), 0.125);
  EXPECT_EQ(value("count(hy_recovery_duration_seconds_count{job=\"hy\"})"), 6);
  const std::string sel =
      "{job=\"hy\",direction=\"train_to_rollout\",transport=\"gloo\","
      "wire=\"bf16\"";
  EXPECT_EQ(value("hy_reshard_duration_seconds_count" + sel + "}"), 5);
  EXPECT_EQ(value("hy_reshard_duration_seconds_bucket" + sel + ",le=\"+Inf\"}"),
            5);
  EXPECT_EQ(
      value("hy_reshard_duration_seconds_bucket" + sel + ",le=\"0.001\"}"), 1);
  EXPECT_EQ(value("hy_reshard_duration_seconds_bucket" + sel + ",le=\"60\"}"),
            4);
  EXPECT_DOUBLE_EQ(value("hy_reshard_duration_seconds_sum" + sel + "}"),
                   0.0005 + 0.003 + 0.04 + 0.5 + 75.0);
  EXPECT_EQ(value("count(hy_reshard_duration_seconds_bucket{job=\"hy\"})"),
            17);  // 16 bounds + "+Inf".
  auto info = p.Query("hy_build_info{job=\"hy\"}");
  ASSERT_TRUE(info.ok());
  ASSERT_EQ((*info)["data"]["result"].size(), 1u);
  EXPECT_EQ((*info)["data"]["result"][0]["metric"]["version"],
            std::string(HyVersion()));
  // The grouping key {job, run, rank} labels the pushed series.
  EXPECT_EQ(value("hy_reshard_bytes_total{job=\"hyctl_train\",run=\"a\","
                  "rank=\"3\",kind=\"remote\"}"),
            777);
  EXPECT_GE(value("push_time_seconds{job=\"hyctl_train\",rank=\"3\"}"),
            1.6e9);

  // The exposer counts the scrapes it served (the library's own metrics).
  auto scrapes =
      p.WaitForResult("exposer_scrapes_total{job=\"hy\"} >= 1", kScrapeDeadlineMs);
  ASSERT_TRUE(scrapes.ok());
  EXPECT_EQ((*scrapes)["data"]["result"].size(), 1u) << scrapes->dump();
  double samples = value("scrape_samples_scraped{job=\"hy\"}");
  double duration = value("scrape_duration_seconds{job=\"hy\"}");
  // Within Prometheus's scrape timeout (= the interval), or the scrape would
  // have failed. How fast it is is printed, not asserted.
  EXPECT_LT(duration, PrometheusServer::kScrapeIntervalSeconds);
  std::cout << "[ timing ] Prometheus scrape of the hy exporter: "
            << duration * 1000 << " ms for " << samples << " samples\n";
}

// Drives every hy metric so that rates, quantiles and ratios have data.
class ActivityGenerator {
 public:
  explicit ActivityGenerator(const HyMetrics& m) : m_(m) {
    thread_ = std::thread([this] { Run(); });
  }
  ~ActivityGenerator() {
    stop_ = true;
    thread_.join();
  }

 private:
  void Run() {
    Histogram* t2r =
        *m_.ReshardDuration(ReshardDirection::kTrainToRollout,
                            ReshardTransport::kGloo, ReshardWire::kBf16);
    Histogram* r2t =
        *m_.ReshardDuration(ReshardDirection::kRolloutToTrain,
                            ReshardTransport::kGloo, ReshardWire::kDelta);
    for (int i = 0; !stop_.load(); ++i) {
      double jitter = (i % 10) / 100.0;
      t2r->Observe(0.05 + jitter);
      r2t->Observe(0.2 + jitter);
      for (int p = 0; p < static_cast<int>(ReshardPhase::kCount); ++p) {
        m_.reshard_phase(static_cast<ReshardPhase>(p))->Observe(0.01 + jitter);
      }
      for (int k = 0; k < static_cast<int>(ReshardBytesKind::kCount); ++k) {
        m_.reshard_bytes(static_cast<ReshardBytesKind>(k))
            ->Increment((k + 1) << 20);
      }
      m_.reshard_logical_bytes->Increment(6 << 20);
      m_.reshard_wire_bytes(ReshardWire::kBf16)->Increment(3 << 20);
      m_.reshard_wire_bytes(ReshardWire::kDelta)->Increment(1 << 18);
      m_.iteration_duration->Observe(2 + jitter);
      m_.checkpoint_blocking->Observe(0.3 + jitter);
      m_.checkpoint_last_replicated_step->Set(i - 1);
      m_.replication_lag_steps->Set(1);
      for (int peer = 0; peer < 4; ++peer) {
        (*m_.PeerHeartbeatAge(peer))->Set(0.1 + jitter);
      }
      if (i % 7 == 0) m_.restarts(RestartCause::kProcessExit)->Increment();
      m_.checkpoint_save_duration->Observe(1.5 + jitter);
      m_.checkpoint_commit_duration->Observe(0.02 + jitter / 10);
      m_.checkpoint_written_bytes->Increment(1e6);
      m_.checkpoint_logical_bytes->Increment(3.7e6);
      m_.checkpoint_last_committed_step->Set(i);
      for (int p = 0; p < static_cast<int>(RecoveryPhase::kCount); ++p) {
        m_.recovery_duration(static_cast<RecoveryPhase>(p))->Observe(0.5 + p);
      }
      if (i % 5 == 0) m_.recoveries(RestartCause::kProcessExit)->Increment();
      m_.ppo_reward_mean->Set(0.5 + jitter);
      m_.ppo_kl->Set(0.01 + jitter / 100);
      m_.ppo_policy_loss->Set(-0.02);
      m_.ppo_value_loss->Set(0.3);
      m_.ppo_tokens_per_second->Set(2500);
      m_.weight_sync_duration->Observe(0.05 + jitter / 10);
      m_.weight_sync_bytes->Increment(6.6e5);
      m_.weight_version->Set(i);
      if (i % 7 == 0) m_.engine_restarts->Increment();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  HyMetrics m_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(PrometheusTest, EveryDashboardExpressionReturnsData) {
  std::string prometheus = RequireBinary("prometheus", "prometheus");
  ASSERT_FALSE(prometheus.empty());
  std::string text = testing::ReadFile(HY_DASHBOARD_PATH);
  json dashboard = json::parse(text, nullptr, false);
  ASSERT_FALSE(dashboard.is_discarded());

  // Four ranks of one run, each with its own registry and exporter, found
  // by Prometheus through the file_sd JSON the ranks write.
  TempDir dir;
  constexpr int kRanks = 4;
  const std::string targets = dir.path() + "/prometheus-targets.json";
  std::vector<std::shared_ptr<Registry>> registries;
  std::vector<std::unique_ptr<Exporter>> exporters;
  std::vector<std::unique_ptr<ActivityGenerator>> activity;
  for (int rank = 0; rank < kRanks; ++rank) {
    registries.push_back(std::make_shared<Registry>());
    auto m = HyMetrics::Register(*registries.back());
    ASSERT_TRUE(m.ok());
    auto e = Exporter::Start("127.0.0.1", 0, registries.back());
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_TRUE(SetFileSdTarget(targets, rank, kRanks, (*e)->target(),
                                {{"run", "r1"}, {"node", std::to_string(rank)}})
                    .ok());
    exporters.push_back(std::move(*e));
    activity.push_back(std::make_unique<ActivityGenerator>(*m));
  }

  auto server = PrometheusServer::Start(prometheus, dir.path(),
                                        {{"hy", 0, false, targets}});
  ASSERT_TRUE(server.ok()) << server.status();
  PrometheusServer& p = **server;
  auto all_up = [&] {
    auto r = p.Query("count(up{job=\"hy\"} == 1)");
    return r.ok() && OnlyValue(*r) == kRanks;
  };
  ASSERT_TRUE(testing::WaitUntil(all_up, kScrapeDeadlineMs))
      << "Prometheus did not scrape all " << kRanks << " ranks:\n"
      << p.LogTail();

  // What Grafana would send with the "All" choice for job and instance and a
  // 1 s scrape interval: $__rate_interval = max($__interval + scrape,
  // 4 * scrape) = 4s.
  const int scrape = PrometheusServer::kScrapeIntervalSeconds;
  const std::map<std::string, std::string> vars = {
      {"job", ".*"},
      {"instance", ".*"},
      {"run", ".*"},
      {"rank", ".*"},
      {"__rate_interval", std::to_string(4 * scrape) + "s"},
      {"__interval", std::to_string(scrape) + "s"},
      {"__range", "30s"},
      {"__range_s", "30"},
  };

  // Template variable queries (Grafana's label_values()).
  auto jobs = p.WaitForResult("hy_build_info", kScrapeDeadlineMs);
  ASSERT_TRUE(jobs.ok() && !(*jobs)["data"]["result"].empty())
      << "no scrape of the exporter:\n"
      << p.LogTail();
  auto job_values = p.LabelValues("job", "hy_build_info");
  ASSERT_TRUE(job_values.ok());
  EXPECT_EQ((*job_values)["data"], json::array({"hy"}));
  auto instance_values = p.LabelValues(
      "instance",
      *testing::SubstituteVariables("hy_build_info{job=~\"$job\"}", vars));
  ASSERT_TRUE(instance_values.ok());
  EXPECT_EQ((*instance_values)["data"].size(), 4u);
  auto rank_values = p.LabelValues("rank", "hy_build_info");
  ASSERT_TRUE(rank_values.ok());
  EXPECT_EQ((*rank_values)["data"], json::array({"0", "1", "2", "3"}));

  int checked = 0;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(kScrapeDeadlineMs);
  for (const json& top : dashboard["panels"]) {
    std::vector<json> panels = {top};
    for (const json& nested : top.value("panels", json::array())) {
      panels.push_back(nested);
    }
    for (const json& panel : panels) {
      for (const json& target : panel.value("targets", json::array())) {
        std::string title =
            panel.value("title", "") + " / " + target.value("refId", "");
        auto expr = testing::SubstituteVariables(
            target["expr"].get<std::string>(), vars);
        ASSERT_TRUE(expr.ok()) << title << ": " << expr.status();
        int left = static_cast<int>(
            std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now())
                .count());
        // Rates need two scrapes inside the window: wait for data, within
        // one budget shared by all expressions.
        Result<json> r = p.Query(*expr);
        bool finite = false;
        testing::WaitUntil(
            [&] {
              r = p.Query(*expr);
              if (!r.ok() || (*r)["status"] != "success") return true;
              const json& result = (*r)["data"]["result"];
              finite = !result.empty();
              for (const json& s : result) {
                finite =
                    finite &&
                    std::isfinite(std::stod(s["value"][1].get<std::string>()));
              }
              return finite;
            },
            std::max(left, 0));
        ASSERT_TRUE(r.ok()) << title << ": " << r.status();
        ASSERT_EQ((*r)["status"], "success")
            << title << " does not parse: " << *expr << "\n"
            << r->dump();
        EXPECT_FALSE((*r)["data"]["result"].empty())
            << title << " returns no data: " << *expr;
        EXPECT_TRUE(finite) << title << " returns NaN/Inf: " << *expr << "\n"
                            << r->dump();
        // A per-rank panel shows every rank.
        if (expr->find("by (rank") != std::string::npos) {
          std::set<std::string> ranks;
          for (const json& series : (*r)["data"]["result"]) {
            ranks.insert(series["metric"].value("rank", ""));
          }
          EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}))
              << title << " does not show every rank: " << *expr;
        }
        auto range = p.QueryRange(*expr, 10);
        ASSERT_TRUE(range.ok());
        EXPECT_EQ((*range)["status"], "success")
            << title << ": " << range->dump();
        if (finite) {
          std::cout << "[ dashboard ] " << title << " = "
                    << (*r)["data"]["result"][0]["value"][1].get<std::string>()
                    << " (" << (*r)["data"]["result"].size() << " series)\n";
        }
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 20);
}

}  // namespace
}  // namespace hy::metrics
