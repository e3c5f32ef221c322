// Collectable: anything that can report metric families at a point in time
// (a Registry, or a caller's own adapter), and the plain-value snapshot types
// those reports are made of. The Exposer and the Gateway read Collectables;
// the text format (text_format.h) writes snapshots.
//
// Ownership: snapshots are values that own their strings. A Collectable is
// owned by whoever created it; exporters hold only weak pointers to it.
//
// Thread-safety: Collect() must be safe to call from any thread, concurrently
// with updates of the metrics it reports (Registry's is).

#ifndef HY_METRICS_COLLECTABLE_H_
#define HY_METRICS_COLLECTABLE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hy/metrics/names.h"

namespace hy::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// "counter", "gauge" or "histogram": the word used in "# TYPE" lines.
std::string_view MetricTypeName(MetricType type);

struct BucketSnapshot {
  double upper_bound = 0;         // The bucket's inclusive upper bound ("le").
  uint64_t cumulative_count = 0;  // Observations <= upper_bound.
};

// One time series (counter or gauge) or one histogram (its buckets, sum and
// count) of a family.
struct MetricSnapshot {
  Labels labels;     // Constant labels of the family merged with the child's.
  double value = 0;  // Counter and gauge.
  // Histogram only. buckets are the finite bounds in increasing order; the
  // "+Inf" bucket is implied and equals `count`.
  std::vector<BucketSnapshot> buckets;
  double sum = 0;
  uint64_t count = 0;
};

struct MetricFamilySnapshot {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<MetricSnapshot> metrics;  // Ordered by label set.
};

class Collectable {
 public:
  virtual ~Collectable() = default;
  // Returns the current value of every family, in a stable order. Never
  // fails: a collectable that cannot read a value leaves the series out.
  virtual std::vector<MetricFamilySnapshot> Collect() const = 0;
};

}  // namespace hy::metrics

#endif  // HY_METRICS_COLLECTABLE_H_
