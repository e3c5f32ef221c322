#include "hy/metrics/family.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <type_traits>

namespace hy::metrics {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Q(std::string_view s) { return "\"" + std::string(s) + "\""; }

Status CheckLabelValue(const std::string& name, const std::string& value) {
  if (value.empty()) {
    return Status::InvalidArgument(
        "label " + Q(name) +
        " has an empty value (Prometheus treats it as no label at all)");
  }
  return ValidateUtf8(value, "value of label " + Q(name));
}

template <typename T>
std::unique_ptr<T> NewChild(const FamilySpec& spec) {
  if constexpr (std::is_same_v<T, Histogram>) {
    return std::make_unique<Histogram>(spec.buckets);
  } else {
    (void)spec;
    return std::make_unique<T>();
  }
}

}  // namespace

bool operator==(const FamilySpec& a, const FamilySpec& b) {
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  return a.name == b.name && a.help == b.help && a.type == b.type &&
         sorted(a.label_names) == sorted(b.label_names) &&
         a.const_labels == b.const_labels && a.buckets == b.buckets &&
         a.max_children == b.max_children;
}

Status ValidateFamilySpec(const FamilySpec& spec) {
  HY_RETURN_IF_ERROR(ValidateMetricName(spec.name));
  const std::string& n = spec.name;
  if (n.find(':') != std::string::npos) {
    return Status::InvalidArgument("metric name " + Q(n) +
                                   " contains ':', which is reserved for "
                                   "recording rules");
  }
  bool is_counter = spec.type == MetricType::kCounter;
  bool is_histogram = spec.type == MetricType::kHistogram;
  if (is_counter && (!EndsWith(n, "_total") || n == "_total")) {
    return Status::InvalidArgument("counter name " + Q(n) +
                                   " must end in \"_total\"");
  }
  if (!is_counter && EndsWith(n, "_total")) {
    return Status::InvalidArgument("only counter names end in \"_total\": " +
                                   Q(n));
  }
  for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (EndsWith(n, suffix)) {
      return Status::InvalidArgument(
          "metric name " + Q(n) + " ends in " + Q(suffix) +
          ", which is reserved for the samples of histograms");
    }
  }
  if (spec.help.empty()) {
    return Status::InvalidArgument("metric " + Q(n) + " has no help text");
  }
  HY_RETURN_IF_ERROR(ValidateUtf8(spec.help, "help of " + Q(n)));

  std::set<std::string> seen;
  for (const std::string& label : spec.label_names) {
    HY_RETURN_IF_ERROR(ValidateLabelName(label));
    if (label == "le" || label == "quantile") {
      return Status::InvalidArgument("label name " + Q(label) + " of " + Q(n) +
                                     " is reserved for histogram buckets and "
                                     "summary quantiles");
    }
    if (!seen.insert(label).second) {
      return Status::InvalidArgument("label name " + Q(label) +
                                     " is listed twice for " + Q(n));
    }
  }
  for (const auto& [label, value] : spec.const_labels) {
    HY_RETURN_IF_ERROR(ValidateLabelName(label));
    if (label == "le" || label == "quantile") {
      return Status::InvalidArgument("constant label " + Q(label) + " of " +
                                     Q(n) + " is reserved");
    }
    if (seen.count(label) != 0) {
      return Status::InvalidArgument("label " + Q(label) + " of " + Q(n) +
                                     " is both constant and variable");
    }
    HY_RETURN_IF_ERROR(CheckLabelValue(label, value));
  }
  if (!is_histogram && !spec.buckets.empty()) {
    return Status::InvalidArgument("buckets are set for " + Q(n) +
                                   ", which is not a histogram");
  }
  HY_RETURN_IF_ERROR(ValidateBuckets(spec.buckets));
  if (spec.max_children < 1) {
    return Status::InvalidArgument("max_children of " + Q(n) + " is 0");
  }
  return Status::OK();
}

std::vector<std::string> SampleNames(const FamilySpec& spec) {
  std::vector<std::string> names = {spec.name};
  if (spec.type == MetricType::kHistogram) {
    names.push_back(spec.name + "_bucket");
    names.push_back(spec.name + "_sum");
    names.push_back(spec.name + "_count");
  }
  return names;
}

template <typename T>
Result<T*> Family<T>::Add(const Labels& labels) {
  bool names_match = labels.size() == spec_.label_names.size();
  for (const std::string& label : spec_.label_names) {
    names_match = names_match && labels.count(label) != 0;
  }
  if (!names_match) {
    std::string want;
    for (const std::string& label : spec_.label_names) {
      want += (want.empty() ? "" : ",") + label;
    }
    std::string got;
    for (const auto& [label, value] : labels) {
      got += (got.empty() ? "" : ",") + label;
    }
    return Status::InvalidArgument("family " + Q(spec_.name) +
                                   " takes labels {" + want + "}, got {" + got +
                                   "}");
  }
  for (const auto& [label, value] : labels) {
    HY_RETURN_IF_ERROR(CheckLabelValue(label, value));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find(labels);
  if (it != children_.end()) return it->second.get();
  if (children_.size() >= spec_.max_children) {
    return Status::ResourceExhausted(
        "family " + Q(spec_.name) + " already has " +
        std::to_string(children_.size()) +
        " children (max_children); refusing another label set");
  }
  T* child = children_.emplace(labels, NewChild<T>(spec_)).first->second.get();
  return child;
}

template <typename T>
bool Family<T>::Has(const Labels& labels) const {
  std::lock_guard<std::mutex> lock(mu_);
  return children_.count(labels) != 0;
}

template <typename T>
Status Family<T>::Remove(T* metric) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = children_.begin(); it != children_.end(); ++it) {
    if (it->second.get() == metric) {
      children_.erase(it);
      return Status::OK();
    }
  }
  return Status::NotFound("metric is not a child of family " + Q(spec_.name));
}

template <typename T>
size_t Family<T>::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return children_.size();
}

template <typename T>
MetricFamilySnapshot Family<T>::Collect() const {
  MetricFamilySnapshot out;
  out.name = spec_.name;
  out.help = spec_.help;
  out.type = T::kType;
  std::lock_guard<std::mutex> lock(mu_);
  out.metrics.reserve(children_.size());
  for (const auto& [labels, child] : children_) {
    MetricSnapshot& m = out.metrics.emplace_back();
    m.labels = spec_.const_labels;
    m.labels.insert(labels.begin(), labels.end());
    child->Collect(&m);
  }
  return out;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

}  // namespace hy::metrics
