// Lint of metrics/grafana/hy-overview.json: a valid classic dashboard model
// that works with any Prometheus data source and queries only what hy
// exports, the right way for each metric type.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "hy/metrics/hy_metrics.h"
#include "promql.h"
#include "subprocess.h"

namespace hy::metrics {
namespace {

using nlohmann::json;

json LoadDashboard() {
  std::string text = testing::ReadFile(HY_DASHBOARD_PATH);
  EXPECT_FALSE(text.empty()) << "cannot read " << HY_DASHBOARD_PATH;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << HY_DASHBOARD_PATH << " is not valid JSON";
  return j;
}

// Every panel, rows' nested panels included.
std::vector<json> Panels(const json& dashboard) {
  std::vector<json> out;
  for (const json& p : dashboard.value("panels", json::array())) {
    out.push_back(p);
    for (const json& nested : p.value("panels", json::array())) {
      out.push_back(nested);
    }
  }
  return out;
}

// Sample names hy exports, by family type.
struct Exported {
  std::set<std::string> counters;  // Counters and histogram _sum/_count.
  std::set<std::string> gauges;
  std::set<std::string> buckets;   // Histogram _bucket series.
  std::set<std::string> families;  // Every family name.
};

// Counted by a worker as it starts: its restart (hy_restarts_total) and the
// recovery it runs (hy_recoveries_total, hy_recovery_duration_seconds). A
// restarted worker serves them on a new series (a new port, a new instance
// label) that begins at its first value, 1; increase() over such a series
// reads 0 (and a ratio of two, NaN). They are read per series with
// max_over_time(...[$__range]), what each worker counted since it began,
// and then summed (the counts: per rank, then the most any rank counted).
const std::set<std::string>& CountedAtStart() {
  static const std::set<std::string> kSet = {
      "hy_restarts_total", "hy_recoveries_total",
      "hy_recovery_duration_seconds_sum", "hy_recovery_duration_seconds_count"};
  return kSet;
}

Exported ExportedNames() {
  Exported e;
  for (const FamilyDef& d : Catalogue()) {
    e.families.insert(d.name);
    switch (d.type) {
      case MetricType::kCounter:
        e.counters.insert(d.name);
        break;
      case MetricType::kGauge:
        e.gauges.insert(d.name);
        break;
      case MetricType::kHistogram:
        e.buckets.insert(d.name + "_bucket");
        e.counters.insert(d.name + "_sum");
        e.counters.insert(d.name + "_count");
        break;
    }
  }
  // prometheus-cpp's Exposer adds its own families to every scrape; the
  // latency summary's quantile series read like gauges.
  e.families.insert({"exposer_scrapes_total", "exposer_transferred_bytes_total",
                     "exposer_request_latencies"});
  e.counters.insert({"exposer_scrapes_total", "exposer_transferred_bytes_total",
                     "exposer_request_latencies_count",
                     "exposer_request_latencies_sum"});
  e.gauges.insert("exposer_request_latencies");
  return e;
}

TEST(DashboardTest, ClassicModelWithDatasourceVariable) {
  json d = LoadDashboard();
  ASSERT_TRUE(d.is_object());
  EXPECT_GE(d.value("schemaVersion", 0), 36);
  EXPECT_FALSE(d.value("title", "").empty());
  EXPECT_FALSE(d.value("uid", "").empty());
  EXPECT_TRUE(d["panels"].is_array());
  bool has_datasource_var = false;
  for (const json& v : d["templating"]["list"]) {
    if (v.value("name", "") == "datasource") {
      EXPECT_EQ(v.value("type", ""), "datasource");
      EXPECT_EQ(v.value("query", ""), "prometheus");
      has_datasource_var = true;
    }
  }
  EXPECT_TRUE(has_datasource_var)
      << "needs a template variable 'datasource' of type datasource";
}

// Every "datasource" anywhere in the model is the variable, never a fixed uid
// (the built-in annotation's "-- Grafana --" source is the one exception).
void CheckDatasources(const json& node, const std::string& where) {
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it.key() == "datasource" && it->is_object() &&
          it->value("type", "") != "grafana") {
        EXPECT_EQ(it->value("type", ""), "prometheus") << where;
        EXPECT_EQ(it->value("uid", ""), "${datasource}") << where;
      } else if (it.key() == "datasource" && it->is_string()) {
        ADD_FAILURE() << where << ": datasource given as a plain string";
      }
      CheckDatasources(*it, where + "/" + it.key());
    }
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) {
      CheckDatasources(node[i], where + "/" + std::to_string(i));
    }
  }
}

TEST(DashboardTest, NoHardCodedDatasource) {
  CheckDatasources(LoadDashboard(), "");
}

TEST(DashboardTest, PanelsTargetsAndUnits) {
  json d = LoadDashboard();
  std::set<int> ids;
  int query_panels = 0;
  for (const json& p : Panels(d)) {
    std::string title = p.value("title", "");
    EXPECT_FALSE(title.empty());
    ASSERT_TRUE(p.contains("id")) << title;
    EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "duplicate id";
    EXPECT_TRUE(p.contains("gridPos")) << title;
    if (p.value("type", "") == "row") continue;
    ++query_panels;
    ASSERT_TRUE(p.contains("datasource")) << title;
    EXPECT_EQ(p["datasource"].value("uid", ""), "${datasource}") << title;
    std::string unit =
        p["fieldConfig"]["defaults"].value("unit", std::string());
    EXPECT_FALSE(unit.empty()) << title << ": no unit";
    ASSERT_TRUE(p["targets"].is_array() && !p["targets"].empty()) << title;
    std::set<std::string> refs;
    for (const json& t : p["targets"]) {
      EXPECT_TRUE(refs.insert(t.value("refId", "")).second) << title;
      EXPECT_EQ(t["datasource"].value("uid", ""), "${datasource}") << title;
      EXPECT_FALSE(t.value("expr", "").empty()) << title;
    }
  }
  EXPECT_GE(query_panels, 8);
}

TEST(DashboardTest, ExpressionsUseOnlyHyMetricsTheRightWay) {
  json d = LoadDashboard();
  Exported e = ExportedNames();
  std::set<std::string> used_families;
  std::set<std::string> quantiled;
  for (const json& p : Panels(d)) {
    for (const json& t : p.value("targets", json::array())) {
      std::string expr = t.value("expr", "");
      std::string where = p.value("title", "") + " / " + t.value("refId", "");
      auto uses = testing::FindSelectors(expr);
      ASSERT_TRUE(uses.ok()) << where << ": " << uses.status();
      EXPECT_FALSE(uses->empty()) << where;
      for (const auto& u : *uses) {
        const std::string& m = u.metric;
        const std::string fn = u.functions.empty() ? "" : u.functions.back();
        bool counter = e.counters.count(m) != 0;
        bool gauge = e.gauges.count(m) != 0;
        bool bucket = e.buckets.count(m) != 0;
        ASSERT_TRUE(counter || gauge || bucket)
            << where << ": " << m << " is not a series hy exports";
        if (CountedAtStart().count(m) != 0) {
          EXPECT_EQ(fn, "max_over_time")
              << where << ": " << m << " is counted as a worker starts, on "
              << "a new series: increase() and rate() read it as 0";
          EXPECT_EQ(u.range, "$__range") << where;
          EXPECT_EQ(u.functions.front(), "sum") << where;
        } else if (counter || bucket) {
          EXPECT_TRUE(fn == "rate" || fn == "increase")
              << where << ": counter " << m << " outside rate()/increase()";
          EXPECT_TRUE(u.range == "$__rate_interval" || u.range == "$__range")
              << where << ": " << m << " read over [" << u.range
              << "], not [$__rate_interval] or [$__range]";
          if (fn == "rate") {
            EXPECT_EQ(u.range, "$__rate_interval") << where;
          }
        } else {
          EXPECT_TRUE(fn != "rate" && fn != "increase" && u.range.empty())
              << where << ": gauge " << m << " used like a counter";
        }
        if (bucket) {
          EXPECT_EQ(u.functions.front(), "histogram_quantile")
              << where << ": " << m << " outside histogram_quantile";
          quantiled.insert(m);
        }
        for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
          if (m.size() > suffix.size() &&
              m.compare(m.size() - suffix.size(), suffix.size(), suffix) == 0 &&
              e.families.count(m) == 0) {
            used_families.insert(m.substr(0, m.size() - suffix.size()));
          }
        }
        used_families.insert(m);
      }
    }
  }
  // The panels the design asks for are there.
  for (const char* m :
       {"hy_reshard_duration_seconds_bucket", "hy_reshard_phase_seconds_bucket",
        "hy_checkpoint_save_duration_seconds_bucket",
        "hy_checkpoint_commit_duration_seconds_bucket"}) {
    EXPECT_EQ(quantiled.count(m), 1u) << m << " has no histogram_quantile";
  }
  for (const std::string& family : e.families) {
    EXPECT_EQ(used_families.count(family), 1u)
        << family << " is exported but not on the dashboard";
  }
}

TEST(DashboardTest, QuantilePanelsShowP50AndP99ByDirection) {
  json d = LoadDashboard();
  bool p50 = false;
  bool p99 = false;
  for (const json& p : Panels(d)) {
    for (const json& t : p.value("targets", json::array())) {
      std::string expr = t.value("expr", "");
      if (expr.find("hy_reshard_duration_seconds_bucket") == std::string::npos)
        continue;
      if (expr.find("by (direction, le)") == std::string::npos) continue;
      p50 |= expr.rfind("histogram_quantile(0.5,", 0) == 0;
      p99 |= expr.rfind("histogram_quantile(0.99,", 0) == 0;
    }
  }
  EXPECT_TRUE(p50 && p99);
}

}  // namespace
}  // namespace hy::metrics
