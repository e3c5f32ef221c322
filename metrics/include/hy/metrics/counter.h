// Counter: a value that only goes up (bytes written, recoveries run), reset
// only when the process restarts. Prometheus derives rates from it.
//
// Ownership: a Counter lives in a Family (family.h), which owns it; callers
// keep the pointer that Family::Add returned, valid until Family::Remove or
// the Registry's destruction.
//
// Thread-safety: Increment and Value are lock-free and may be called from any
// number of threads at once; totals are exact (integer increments stay exact
// up to 2^53).

#ifndef HY_METRICS_COUNTER_H_
#define HY_METRICS_COUNTER_H_

#include <atomic>

#include "hy/metrics/collectable.h"

namespace hy::metrics {

class Counter {
 public:
  static constexpr MetricType kType = MetricType::kCounter;

  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds one.
  void Increment() { Increment(1.0); }

  // Adds `delta`.
  // REQUIRES: delta is finite and >= 0. A counter never goes down and never
  // becomes infinite, so any other delta is dropped (not applied).
  void Increment(double delta);

  // Returns the current total.
  double Value() const { return value_.load(std::memory_order_relaxed); }

  // Writes the value into `out->value`.
  void Collect(MetricSnapshot* out) const { out->value = Value(); }

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace hy::metrics

#endif  // HY_METRICS_COUNTER_H_
