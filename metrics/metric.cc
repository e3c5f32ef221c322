// Counter, Gauge and Histogram.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "hy/metrics/counter.h"
#include "hy/metrics/gauge.h"
#include "hy/metrics/histogram.h"

namespace hy::metrics {
namespace {

void AtomicAdd(std::atomic<double>* target, double delta) {
  double current = target->load(std::memory_order_relaxed);
  while (!target->compare_exchange_weak(current, current + delta,
                                        std::memory_order_relaxed,
                                        std::memory_order_relaxed)) {
  }
}

}  // namespace

void Counter::Increment(double delta) {
  if (!(delta >= 0) || std::isinf(delta)) return;  // Also drops NaN.
  AtomicAdd(&value_, delta);
}

void Gauge::Increment(double delta) { AtomicAdd(&value_, delta); }

void Gauge::SetToCurrentTime() {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  Set(std::chrono::duration<double>(now).count());
}

Status ValidateBuckets(const BucketBoundaries& bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return Status::InvalidArgument(
          "histogram bucket bound " + std::to_string(i) +
          " is not finite (\"+Inf\" is always added; do not list it)");
    }
    if (i > 0 && !(bounds[i] > bounds[i - 1])) {
      return Status::InvalidArgument(
          "histogram bucket bounds are not strictly increasing at index " +
          std::to_string(i));
    }
  }
  return Status::OK();
}

Result<BucketBoundaries> ExponentialBuckets(double start, double factor,
                                            int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) {
    return Status::InvalidArgument(
        "ExponentialBuckets needs start > 0, factor > 1, count >= 1");
  }
  BucketBoundaries bounds;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) bounds.push_back(b);
  HY_RETURN_IF_ERROR(ValidateBuckets(bounds));
  return bounds;
}

Result<BucketBoundaries> LinearBuckets(double start, double width, int count) {
  if (!(width > 0) || count < 1 || !std::isfinite(start)) {
    return Status::InvalidArgument(
        "LinearBuckets needs a finite start, width > 0, count >= 1");
  }
  BucketBoundaries bounds;
  for (int i = 0; i < count; ++i) bounds.push_back(start + i * width);
  HY_RETURN_IF_ERROR(ValidateBuckets(bounds));
  return bounds;
}

Histogram::Histogram(BucketBoundaries bounds)
    : bounds_(std::move(bounds)),
      counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    counts_[i].store(0, std::memory_order_relaxed);
  }
}

void Histogram::Observe(double value) {
  if (!std::isfinite(value)) return;
  // The first bound >= value: buckets are inclusive ("le").
  size_t i =
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(&sum_, value);
}

uint64_t Histogram::Count() const {
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
  }
  return total;
}

void Histogram::Collect(MetricSnapshot* out) const {
  out->buckets.clear();
  out->buckets.reserve(bounds_.size());
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    out->buckets.push_back({bounds_[i], cumulative});
  }
  cumulative += counts_[bounds_.size()].load(std::memory_order_relaxed);
  out->count = cumulative;
  out->sum = Sum();
}

double ScopedTimer::Stop() {
  if (histogram_ == nullptr) return 0;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count();
  histogram_->Observe(seconds);
  histogram_ = nullptr;
  return seconds;
}

}  // namespace hy::metrics
