// Gauge: a value that goes up and down (last committed step, KL divergence,
// tokens per second).
//
// Ownership: as for Counter, a Gauge is owned by its Family; the pointer from
// Family::Add is valid until Family::Remove or the Registry's destruction.
//
// Thread-safety: every method is lock-free and may be called from any thread;
// concurrent Increment/Decrement calls are all applied.

#ifndef HY_METRICS_GAUGE_H_
#define HY_METRICS_GAUGE_H_

#include <atomic>

#include "hy/metrics/collectable.h"

namespace hy::metrics {

class Gauge {
 public:
  static constexpr MetricType kType = MetricType::kGauge;

  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  // Any double is allowed, NaN and infinities included (they are exported as
  // "NaN", "+Inf", "-Inf").
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Increment(double delta = 1.0);
  void Decrement(double delta = 1.0) { Increment(-delta); }
  // Sets the gauge to the current Unix time in seconds.
  void SetToCurrentTime();

  double Value() const { return value_.load(std::memory_order_relaxed); }

  // Writes the value into `out->value`.
  void Collect(MetricSnapshot* out) const { out->value = Value(); }

 private:
  std::atomic<double> value_{0.0};
};

}  // namespace hy::metrics

#endif  // HY_METRICS_GAUGE_H_
