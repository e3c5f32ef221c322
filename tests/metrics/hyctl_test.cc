// hyctl as a user runs it: `hyctl metrics` in each output format, its exit
// codes, and promtool on its output.

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "hy/metrics/hy_metrics.h"
#include "subprocess.h"

namespace hy::metrics {
namespace {

testing::ProcessResult Hyctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {HY_HYCTL_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = testing::RunProcess(argv, "", 30000);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : testing::ProcessResult{};
}

std::string Reference() {
  Registry r;
  EXPECT_TRUE(HyMetrics::Register(r).ok());
  return prometheus::TextSerializer().Serialize(r.Collect());
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(HyctlTest, MetricsPrintsTheExpositionOfEveryHyMetric) {
  auto r = Hyctl({"metrics"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // Every line prometheus-cpp writes for the registry (in the catalogue's
  // order of families)...
  const std::vector<std::string> lines = Lines(r.out);
  const std::set<std::string> got(lines.begin(), lines.end());
  for (const std::string& line : Lines(Reference())) {
    EXPECT_EQ(got.count(line), 1u) << "missing: " << line;
  }
  // ... and the HELP and TYPE of every family, series or not (labelled
  // families have none until something sets one).
  for (const FamilyDef& d : Catalogue()) {
    EXPECT_NE(r.out.find("# HELP " + d.name + " "), std::string::npos)
        << d.name;
    EXPECT_NE(r.out.find("# TYPE " + d.name + " " +
                         std::string(MetricTypeName(d.type)) + "\n"),
              std::string::npos)
        << d.name;
  }
  EXPECT_NE(r.out.find("# TYPE hy_reshard_duration_seconds histogram\n"),
            std::string::npos);
  EXPECT_NE(r.out.find("# TYPE hy_peer_heartbeat_age_seconds gauge\n"),
            std::string::npos);
  EXPECT_NE(r.out.find("# TYPE hy_reshard_phase_seconds histogram\n"),
            std::string::npos);
  EXPECT_NE(r.out.find("hy_build_info{version=\"" + std::string(HyVersion()) +
                       "\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(Hyctl({"metrics", "-o", "text"}).out, r.out);
}

// Every metric the Grafana dashboard queries is one hyctl metrics lists
// (a histogram's _bucket, _sum and _count series by the family's name).
TEST(HyctlTest, MetricsListsEveryMetricTheDashboardAsksFor) {
  std::ifstream in(HY_DASHBOARD_PATH);
  ASSERT_TRUE(in) << HY_DASHBOARD_PATH;
  const std::string dashboard((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
  const std::string out = Hyctl({"metrics"}).out;
  const std::regex name(R"(\bhy_[a-z0-9_]+)");
  std::set<std::string> asked;
  for (auto it = std::sregex_iterator(dashboard.begin(), dashboard.end(), name);
       it != std::sregex_iterator(); ++it) {
    asked.insert(it->str());
  }
  ASSERT_GE(asked.size(), 10u);
  for (std::string metric : asked) {
    for (const char* suffix : {"_bucket", "_count", "_sum"}) {
      const std::string s(suffix);
      if (metric.size() > s.size() &&
          metric.compare(metric.size() - s.size(), s.size(), s) == 0 &&
          out.find("# TYPE " + metric + " ") == std::string::npos) {
        metric.resize(metric.size() - s.size());
      }
    }
    EXPECT_NE(out.find("# TYPE " + metric + " "), std::string::npos)
        << "the dashboard asks for " << metric;
  }
}

TEST(HyctlTest, MetricsOutputPassesPromtool) {
  std::string promtool = testing::FindExecutable("promtool");
  ASSERT_FALSE(promtool.empty())
      << testing::MissingBinaryMessage("promtool", "prometheus");
  auto out = Hyctl({"metrics"});
  auto r = testing::RunProcess({promtool, "check", "metrics"}, out.out, 30000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_EQ(r->out + r->err, "");
}

TEST(HyctlTest, MetricsTable) {
  auto r = Hyctl({"metrics", "-o", "table"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("NAME", 0), 0u);
  EXPECT_NE(r.out.find("hy_reshard_bytes_total"), std::string::npos);
  EXPECT_NE(r.out.find("direction,transport,wire"), std::string::npos);
  size_t lines = std::count(r.out.begin(), r.out.end(), '\n');
  EXPECT_EQ(lines, 1u + Catalogue().size());  // Header + every family.
}

TEST(HyctlTest, MetricsJson) {
  auto r = Hyctl({"metrics", "--output", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j.size(), Catalogue().size());
  bool found = false;
  for (const auto& f : j) {
    if (f["name"] == "hy_reshard_phase_seconds") {
      found = true;
      EXPECT_EQ(f["type"], "histogram");
      EXPECT_EQ(f["labels"], nlohmann::json::array({"phase"}));
      EXPECT_EQ(f["buckets"].size(), 16u);
      EXPECT_EQ(f["series"].size(), 4u);
    }
  }
  EXPECT_TRUE(found);
}

TEST(HyctlTest, UsageErrorsExit64AndHelpDocumentsExitCodes) {
  auto bad_format = Hyctl({"metrics", "-o", "yaml"});
  EXPECT_EQ(bad_format.exit_code, 64);
  EXPECT_EQ(bad_format.out, "");
  EXPECT_NE(bad_format.err, "");
  EXPECT_EQ(Hyctl({}).exit_code, 64);
  EXPECT_EQ(Hyctl({"no-such-command"}).exit_code, 64);
  EXPECT_EQ(Hyctl({"metrics", "--bogus"}).exit_code, 64);

  auto help = Hyctl({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* text :
       {"metrics", "Exit codes", "64", "data loss", "not found"}) {
    EXPECT_NE(help.out.find(text), std::string::npos) << text;
  }
  auto version = Hyctl({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out, "hyctl " + std::string(HyVersion()) + "\n");
}

}  // namespace
}  // namespace hy::metrics
