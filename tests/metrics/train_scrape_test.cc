// A real Prometheus scrapes a real 4-rank `hyctl train` run through the
// file_sd JSON the ranks write into the store root: every rank is a target
// labelled run, rank and node; every Grafana dashboard expression returns
// data, for every rank where the panel is per rank; and `promtool check
// metrics` is clean on every rank's endpoint.

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <set>

#include "promql.h"
#include "servers.h"

namespace hy::metrics {
namespace {

using nlohmann::json;
using testing::PrometheusServer;

constexpr int kRanks = 4;
constexpr int kDeadlineMs = 240000;  // A loaded 2-core machine, 4 trainers.

std::vector<std::string> Exprs(const json& dashboard) {
  std::vector<std::string> out;
  for (const json& top : dashboard["panels"]) {
    std::vector<json> panels = {top};
    for (const json& n : top.value("panels", json::array())) {
      panels.push_back(n);
    }
    for (const json& p : panels) {
      for (const json& t : p.value("targets", json::array())) {
        out.push_back(t["expr"].get<std::string>());
      }
    }
  }
  return out;
}

bool PerRank(const std::string& expr) {
  return expr.find("by (rank") != std::string::npos;
}

TEST(TrainScrapeTest, FourRankRunThroughFileSd) {
  const std::string prometheus = testing::FindExecutable("prometheus");
  const std::string promtool = testing::FindExecutable("promtool");
  ASSERT_FALSE(prometheus.empty())
      << testing::MissingBinaryMessage("prometheus", "prometheus");
  ASSERT_FALSE(promtool.empty())
      << testing::MissingBinaryMessage("promtool", "prometheus");
  json dashboard =
      json::parse(testing::ReadFile(HY_DASHBOARD_PATH), nullptr, false);
  ASSERT_FALSE(dashboard.is_discarded());

  testing::TempDir dir;
  const std::string store = dir.path() + "/run4";
  const std::string targets = store + "/prometheus-targets.json";
  // Long enough to be scraped for a while; stopped by the test.
  auto train = testing::ChildProcess::Spawn(
      {HY_HYCTL_PATH, "train", "--store", store, "--nproc",
       std::to_string(kRanks), "--iterations", "1000", "--metrics-port", "0",
       "--set", "checkpoint.save_every=1"},
      dir.path() + "/train.log");
  ASSERT_TRUE(train.ok()) << train.status();

  // The repository's metrics/prometheus.yml, its RUN_ROOT this run's and
  // its 5 s intervals the tests' 1 s.
  std::string yaml = testing::ReadFile(HY_PROMETHEUS_YML_PATH);
  ASSERT_NE(yaml.find("RUN_ROOT/prometheus-targets.json"), std::string::npos);
  for (const std::string& from : {std::string("RUN_ROOT"), std::string("5s")}) {
    const std::string to = from == "RUN_ROOT" ? store : "1s";
    for (size_t at; (at = yaml.find(from)) != std::string::npos;) {
      yaml.replace(at, from.size(), to);
    }
  }
  auto server = PrometheusServer::StartWithConfig(prometheus, dir.path() + "/",
                                                  yaml);
  ASSERT_TRUE(server.ok()) << server.status();
  PrometheusServer& p = **server;

  // Every rank is up, and has trained an iteration or two.
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto r = p.Query(
            "count(hy_iteration_duration_seconds_count{job=\"hy\"} >= 2)");
        return !(*train)->Running() ||
               (r.ok() && !(*r)["data"]["result"].empty() &&
                (*r)["data"]["result"][0]["value"][1] ==
                    std::to_string(kRanks));
      },
      kDeadlineMs))
      << "not every rank was scraped with two iterations done:\n"
      << (*train)->LogTail() << p.LogTail();
  ASSERT_TRUE((*train)->Running()) << (*train)->LogTail();

  // The file_sd targets carry run, rank and node.
  json groups = json::parse(testing::ReadFile(targets), nullptr, false);
  ASSERT_TRUE(groups.is_array());
  ASSERT_EQ(groups.size(), static_cast<size_t>(kRanks));
  auto up = p.Query("up{job=\"hy\"}");
  ASSERT_TRUE(up.ok());
  std::set<std::string> ranks;
  for (const json& s : (*up)["data"]["result"]) {
    EXPECT_EQ(s["metric"].value("run", ""), "run4");
    EXPECT_FALSE(s["metric"].value("node", "").empty());
    ranks.insert(s["metric"].value("rank", ""));
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));

  // promtool on every rank's endpoint.
  for (const json& g : groups) {
    const std::string target = g["targets"][0];
    const size_t colon = target.rfind(':');
    auto r = testing::HttpGet(target.substr(0, colon),
                              std::stoi(target.substr(colon + 1)), "/metrics",
                              testing::kHttpTimeoutMs);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, 200);
    auto check =
        testing::RunProcess({promtool, "check", "metrics"}, r->body, 30000);
    ASSERT_TRUE(check.ok());
    EXPECT_EQ(check->exit_code, 0)
        << target << ": " << check->out << check->err;
    EXPECT_EQ(check->out + check->err, "") << target;
    std::cout << "[ scrape ] rank " << g["labels"]["rank"] << " " << target
              << ": " << r->body.size() << " bytes\n";
  }

  const int scrape = PrometheusServer::kScrapeIntervalSeconds;
  const std::map<std::string, std::string> vars = {
      {"job", ".*"},
      {"instance", ".*"},
      {"run", ".*"},
      {"rank", ".*"},
      {"__rate_interval", std::to_string(4 * scrape) + "s"},
      {"__interval", std::to_string(scrape) + "s"},
      {"__range", "5m"},
      {"__range_s", "300"},
  };
  // Every panel's query has data (from every rank where it is per rank)
  // once enough scrapes have seen the counters move: a rate needs two
  // samples in its window, so a fast run may have to wait a few scrapes.
  for (const std::string& raw : Exprs(dashboard)) {
    auto expr = testing::SubstituteVariables(raw, vars);
    ASSERT_TRUE(expr.ok()) << raw;
    json last;
    auto has_data = [&] {
      auto r = p.Query(*expr);
      if (!r.ok() || (*r)["status"] != "success") return false;
      last = *r;
      const json& result = last["data"]["result"];
      if (result.empty()) return false;
      if (!PerRank(*expr)) return true;
      std::set<std::string> seen;
      for (const json& s : result) seen.insert(s["metric"].value("rank", ""));
      return seen.size() == static_cast<size_t>(kRanks);
    };
    EXPECT_TRUE(testing::WaitUntil(has_data, kDeadlineMs))
        << "no data from every rank: " << *expr << "\n"
        << last.dump() << "\n"
        << (*train)->LogTail();
  }
}

}  // namespace
}  // namespace hy::metrics
