// ScopedTimer: observes the seconds elapsed between its construction and its
// destruction (or Stop()) into a prometheus-cpp Histogram.
//
//   { hy::metrics::ScopedTimer t(m.checkpoint_commit_duration); Commit(); }
//
// Ownership: does not own the histogram, which must outlive the timer.
// Thread-safety: not thread-safe; use one timer per timed operation.

#ifndef HY_METRICS_SCOPED_TIMER_H_
#define HY_METRICS_SCOPED_TIMER_H_

#include <prometheus/histogram.h>

#include <chrono>

namespace hy::metrics {

class ScopedTimer {
 public:
  // `histogram` may be null: then nothing is recorded.
  explicit ScopedTimer(prometheus::Histogram* histogram)
      : histogram_(histogram), start_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() { Stop(); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

  // Records now and returns the seconds recorded; later calls record nothing
  // and return 0. Never fails.
  double Stop() {
    if (stopped_) return 0;
    stopped_ = true;
    const double s = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start_)
                         .count();
    if (histogram_ != nullptr) histogram_->Observe(s);
    return s;
  }

 private:
  prometheus::Histogram* histogram_;
  std::chrono::steady_clock::time_point start_;
  bool stopped_ = false;
};

}  // namespace hy::metrics

#endif  // HY_METRICS_SCOPED_TIMER_H_
