// Test support: just enough PromQL and Grafana to lint a dashboard, i.e.
// find the metric names an expression selects, with the functions around
// each and the range it is read over, and substitute Grafana's variables.

#ifndef HY_TESTS_METRICS_PROMQL_H_
#define HY_TESTS_METRICS_PROMQL_H_

#include <map>
#include <string>
#include <vector>

#include "hy/common/result.h"

namespace hy::metrics::testing {

// One metric name selected in an expression.
struct SelectorUse {
  std::string metric;
  // Functions and aggregations enclosing it, outermost first
  // (e.g. {"histogram_quantile", "sum", "rate"}).
  std::vector<std::string> functions;
  std::string range;  // Text inside "[...]" right after it, or "".
};

// Scans `expr`: strings, label matchers, grouping label lists
// (by/without/on/ignoring/group_left/group_right) and numbers are skipped;
// every other identifier that is not a function, aggregation or keyword is a
// metric name. Returns kInvalidArgument for unbalanced brackets or strings.
Result<std::vector<SelectorUse>> FindSelectors(const std::string& expr);

// Replaces Grafana variables ($name, ${name}, ${name:format}, [[name]]) by
// `values[name]`. Returns kNotFound naming the first variable without a
// value.
Result<std::string> SubstituteVariables(
    const std::string& text, const std::map<std::string, std::string>& values);

}  // namespace hy::metrics::testing

#endif  // HY_TESTS_METRICS_PROMQL_H_
