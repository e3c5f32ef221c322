// Names and label sets of Prometheus metrics, and the checks every name and
// label goes through before hy exports it.
//
// The rules are those of the Prometheus data model, applied strictly:
//   metric names  [a-zA-Z_:][a-zA-Z0-9_:]*, not starting with "__"
//   label names   [a-zA-Z_][a-zA-Z0-9_]*,  not starting with "__"
//   label values  any valid UTF-8 (Prometheus fails a whole scrape on a
//                 series with invalid UTF-8, so hy refuses it up front)
//
// Thread-safety: free functions without state; safe from any thread.

#ifndef HY_METRICS_NAMES_H_
#define HY_METRICS_NAMES_H_

#include <map>
#include <string>
#include <string_view>

#include "hy/common/status.h"

namespace hy::metrics {

// A label set: label name -> label value. Ordered by name, which is also the
// order in which labels are written out.
using Labels = std::map<std::string, std::string>;

// Returns OK, or kInvalidArgument naming the offending character.
Status ValidateMetricName(std::string_view name);

// Returns OK, or kInvalidArgument. Names reserved by Prometheus (leading
// "__") are refused.
Status ValidateLabelName(std::string_view name);

// Returns OK if `text` is well-formed UTF-8 (no overlong forms, no
// surrogates, nothing past U+10FFFF), else kInvalidArgument. `what` names the
// text in the message ("label value", "help").
Status ValidateUtf8(std::string_view text, std::string_view what);

// Checks every name and value of `labels`: returns the first error found.
Status ValidateLabels(const Labels& labels);

}  // namespace hy::metrics

#endif  // HY_METRICS_NAMES_H_
