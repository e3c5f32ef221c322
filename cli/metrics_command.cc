#include "metrics_command.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "hy/metrics/exposer.h"
#include "hy/metrics/hy_metrics.h"
#include "hy/metrics/registry.h"
#include "hy/metrics/text_format.h"

namespace hy::cli {
namespace {

using metrics::FamilySpec;
using metrics::MetricFamilySnapshot;
using metrics::MetricType;

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

std::string TableOutput(const std::vector<FamilySpec>& specs) {
  std::vector<std::vector<std::string>> rows;
  for (const FamilySpec& s : specs) {
    std::vector<std::string> labels = s.label_names;
    for (const auto& [k, v] : s.const_labels) labels.push_back(k + "=" + v);
    rows.push_back({s.name, std::string(metrics::MetricTypeName(s.type)),
                    labels.empty() ? "-" : Join(labels), s.help});
  }
  return FormatTable({"NAME", "TYPE", "LABELS", "HELP"}, rows);
}

nlohmann::ordered_json Number(double v) {
  // JSON has no NaN or infinities: write them as Prometheus spells them.
  if (std::isfinite(v)) return v;
  return metrics::FormatDouble(v);
}

std::string JsonOutput(const std::vector<FamilySpec>& specs,
                       const std::vector<MetricFamilySnapshot>& families) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < specs.size() && i < families.size(); ++i) {
    const FamilySpec& s = specs[i];
    nlohmann::ordered_json f;
    f["name"] = s.name;
    f["type"] = std::string(metrics::MetricTypeName(s.type));
    f["help"] = s.help;
    f["labels"] = s.label_names;
    f["const_labels"] = s.const_labels;
    if (s.type == MetricType::kHistogram) f["buckets"] = s.buckets;
    nlohmann::ordered_json series = nlohmann::ordered_json::array();
    for (const auto& m : families[i].metrics) {
      nlohmann::ordered_json one;
      one["labels"] = m.labels;
      if (s.type == MetricType::kHistogram) {
        one["count"] = m.count;
        one["sum"] = Number(m.sum);
      } else {
        one["value"] = Number(m.value);
      }
      series.push_back(std::move(one));
    }
    f["series"] = std::move(series);
    out.push_back(std::move(f));
  }
  return out.dump(2) + "\n";
}

int RunMetrics(const std::string& format) {
  metrics::Registry registry;
  Status s = metrics::HyMetrics::Register(registry).status();
  if (s.ok()) s = metrics::RegisterExporterMetrics(registry).status();
  if (!s.ok()) return Report("metrics", s);
  if (format == "table") {
    std::cout << TableOutput(registry.Describe());
  } else if (format == "json") {
    std::cout << JsonOutput(registry.Describe(), registry.Collect());
  } else {
    std::cout << metrics::SerializeText(registry.Collect());
  }
  std::cout.flush();
  if (!std::cout) {
    return Report("metrics", Status::IOError("cannot write to stdout"));
  }
  return kExitOk;
}

}  // namespace

void AddMetricsCommand(CLI::App* app, int* exit_code) {
  CLI::App* cmd = app->add_subcommand(
      "metrics",
      "Print every metric hy exports, at zero, with HELP and TYPE: the "
      "Prometheus text exposition (default), a table, or JSON.");
  auto format = std::make_shared<std::string>();
  AddOutputOption(cmd, format.get(), {"text", "table", "json"});
  cmd->callback([format, exit_code] { *exit_code = RunMetrics(*format); });
}

}  // namespace hy::cli
