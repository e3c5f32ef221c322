// Histogram: counts observations (durations, sizes) in buckets with fixed,
// inclusive upper bounds, plus their sum and count, so that Prometheus can
// estimate quantiles with histogram_quantile().
//
// Buckets are cumulative when exported: the bucket `le="b"` counts every
// observation <= b, and the implied `le="+Inf"` bucket equals `_count`
// (always: the count is derived from the same bucket values in one snapshot).
//
// Ownership: owned by its Family; the bucket bounds are fixed per family.
//
// Thread-safety: Observe is lock-free (one atomic add on the bucket, a CAS
// loop on the sum) and may be called from any number of threads; Collect may
// run concurrently with it. A snapshot taken while observations are in flight
// may count an observation in its bucket before its value reaches `_sum`.

#ifndef HY_METRICS_HISTOGRAM_H_
#define HY_METRICS_HISTOGRAM_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "hy/common/result.h"
#include "hy/metrics/collectable.h"

namespace hy::metrics {

// Finite upper bounds in strictly increasing order; "+Inf" is always added.
using BucketBoundaries = std::vector<double>;

// Returns OK, or kInvalidArgument if a bound is NaN or infinite or the bounds
// are not strictly increasing.
Status ValidateBuckets(const BucketBoundaries& bounds);

// `count` bounds start, start*factor, start*factor^2, ...
// Returns kInvalidArgument unless start > 0, factor > 1 and count >= 1.
Result<BucketBoundaries> ExponentialBuckets(double start, double factor,
                                            int count);

// `count` bounds start, start+width, ...
// Returns kInvalidArgument unless width > 0 and count >= 1.
Result<BucketBoundaries> LinearBuckets(double start, double width, int count);

class Histogram {
 public:
  static constexpr MetricType kType = MetricType::kHistogram;

  // REQUIRES: ValidateBuckets(bounds).ok() (Family checks it before it
  // constructs a Histogram).
  explicit Histogram(BucketBoundaries bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Records one observation. NaN and infinities are dropped: they would make
  // `_sum` meaningless for the rest of the process's life.
  void Observe(double value);

  // Total observations and their sum so far.
  uint64_t Count() const;
  double Sum() const { return sum_.load(std::memory_order_relaxed); }
  const BucketBoundaries& bounds() const { return bounds_; }

  // Writes cumulative buckets, sum and count into `out`.
  void Collect(MetricSnapshot* out) const;

 private:
  const BucketBoundaries bounds_;
  // counts_[i] = observations in (bounds_[i-1], bounds_[i]]; the last slot is
  // (bounds_.back(), +Inf). Not cumulative, so Observe touches one slot.
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0.0};
};

// Observes the seconds elapsed between construction and destruction (or
// Stop()) into a histogram. Not thread-safe; use one per timed operation.
class ScopedTimer {
 public:
  // `histogram` may be null (then nothing is recorded); it must outlive the
  // timer.
  explicit ScopedTimer(Histogram* histogram)
      : histogram_(histogram), start_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() { Stop(); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

  // Records now and returns the seconds recorded; later calls record nothing
  // and return 0.
  double Stop();

 private:
  Histogram* histogram_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace hy::metrics

#endif  // HY_METRICS_HISTOGRAM_H_
