// The Prometheus text exposition format, version 0.0.4, written exactly:
//
//   # HELP <name> <help, with '\' and newline escaped>
//   # TYPE <name> counter|gauge|histogram
//   <name>{<label>="<value, with '\' '"' and newline escaped>",...} <value>
//
// One contiguous group per family, HELP and TYPE before its first sample,
// labels in name order (a histogram's "le" last), no timestamps, every line
// ending in '\n'. Numbers are printed locale-independently as Go's
// strconv.FormatFloat(v, 'g', -1, 64) prints them (the Prometheus Go client's
// choice, so bucket bounds read the same as from any Go exporter): the
// shortest text that parses back to the same double ("0.005", "1e-05",
// "1e+06"), "+Inf", "-Inf", "NaN", and "0" for -0 as the Go client writes it.
//
// Thread-safety: free functions without state; safe from any thread.

#ifndef HY_METRICS_TEXT_FORMAT_H_
#define HY_METRICS_TEXT_FORMAT_H_

#include <string>
#include <string_view>
#include <vector>

#include "hy/metrics/collectable.h"

namespace hy::metrics {

// The HTTP Content-Type of text written by SerializeText.
inline constexpr std::string_view kTextContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// Formats a sample value or bucket bound (see above).
std::string FormatDouble(double value);

// Escapes '\' as "\\" and newline as "\n" (for # HELP lines).
std::string EscapeHelp(std::string_view help);

// Escapes '\' as "\\", '"' as "\"" and newline as "\n" (label values).
std::string EscapeLabelValue(std::string_view value);

// Appends one family to `out`. A family without children writes only its
// HELP and TYPE lines.
void AppendFamilyText(const MetricFamilySnapshot& family, std::string* out);

// Returns the exposition of `families`, in order.
// REQUIRES: family names are distinct (MergeFamilies makes them so).
std::string SerializeText(const std::vector<MetricFamilySnapshot>& families);

// Combines families gathered from several collectables so that every name
// appears once: families with the same name, type and help are merged (a
// label set already present is not added again); a family whose type or help
// disagrees with the first of its name is left out. Order: first appearance.
// Returns the merged list; `*dropped` (if not null) receives the number of
// families and series left out.
std::vector<MetricFamilySnapshot> MergeFamilies(
    std::vector<MetricFamilySnapshot> families, size_t* dropped = nullptr);

}  // namespace hy::metrics

#endif  // HY_METRICS_TEXT_FORMAT_H_
