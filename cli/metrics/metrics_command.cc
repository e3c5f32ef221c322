#include "metrics/metrics_command.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <prometheus/text_serializer.h>
#include <string>

#include "cli_util.h"
#include "hy/metrics/hy_metrics.h"

namespace hy::cli {
namespace {

using metrics::FamilyDef;
using metrics::MetricType;

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

std::string TableOutput() {
  std::vector<std::vector<std::string>> rows;
  for (const FamilyDef& d : metrics::Catalogue()) {
    rows.push_back({d.name, std::string(metrics::MetricTypeName(d.type)),
                    d.label_names.empty() ? "-" : Join(d.label_names),
                    d.help});
  }
  return FormatTable({"NAME", "TYPE", "LABELS", "HELP"}, rows);
}

nlohmann::ordered_json Number(double v) {
  // JSON has no NaN or infinities: write them as Prometheus spells them.
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf";
}

std::string JsonOutput(const std::vector<prometheus::MetricFamily>& families) {
  std::map<std::string, const prometheus::MetricFamily*> by_name;
  for (const auto& f : families) by_name[f.name] = &f;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const FamilyDef& d : metrics::Catalogue()) {
    nlohmann::ordered_json f;
    f["name"] = d.name;
    f["type"] = std::string(metrics::MetricTypeName(d.type));
    f["help"] = d.help;
    f["labels"] = d.label_names;
    if (d.type == MetricType::kHistogram) f["buckets"] = d.buckets;
    nlohmann::ordered_json series = nlohmann::ordered_json::array();
    auto it = by_name.find(d.name);
    for (const auto& m : it == by_name.end()
                             ? std::vector<prometheus::ClientMetric>{}
                             : it->second->metric) {
      nlohmann::ordered_json one;
      std::map<std::string, std::string> labels;
      for (const auto& l : m.label) labels[l.name] = l.value;
      one["labels"] = labels;
      switch (d.type) {
        case MetricType::kHistogram:
          one["count"] = m.histogram.sample_count;
          one["sum"] = Number(m.histogram.sample_sum);
          break;
        case MetricType::kCounter:
          one["value"] = Number(m.counter.value);
          break;
        case MetricType::kGauge:
          one["value"] = Number(m.gauge.value);
          break;
      }
      series.push_back(std::move(one));
    }
    f["series"] = std::move(series);
    out.push_back(std::move(f));
  }
  return out.dump(2) + "\n";
}

// HELP text as the exposition format escapes it (backslash, newline).
std::string EscapeHelp(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// The exposition of every family of the catalogue, in its order. A
// labelled family has no series until something sets one (the reshard's
// per-direction durations, the heartbeat age per peer), and prometheus-cpp
// writes nothing for a family without series; its HELP and TYPE lines are
// written here, so that every metric hy exports is listed.
std::string TextOutput(const std::vector<prometheus::MetricFamily>& families) {
  std::map<std::string, const prometheus::MetricFamily*> by_name;
  for (const auto& f : families) by_name[f.name] = &f;
  const prometheus::TextSerializer serializer;
  std::string out;
  for (const FamilyDef& d : metrics::Catalogue()) {
    auto it = by_name.find(d.name);
    if (it != by_name.end() && !it->second->metric.empty()) {
      out += serializer.Serialize({*it->second});
      continue;
    }
    out += "# HELP " + d.name + " " + EscapeHelp(d.help) + "\n";
    out += "# TYPE " + d.name + " " +
           std::string(metrics::MetricTypeName(d.type)) + "\n";
  }
  return out;
}

int RunMetrics(const std::string& format) {
  metrics::Registry registry;
  const Status s = metrics::HyMetrics::Register(registry).status();
  if (!s.ok()) return Report("metrics", s);
  if (format == "table") {
    std::cout << TableOutput();
  } else if (format == "json") {
    std::cout << JsonOutput(registry.Collect());
  } else {
    std::cout << TextOutput(registry.Collect());
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
