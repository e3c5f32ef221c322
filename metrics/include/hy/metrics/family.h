// Family<T>: all time series of one metric (one name, help, type and set of
// label names), one child metric per distinct label set, e.g. the family
// hy_reshard_bytes_total with children {kind="local"}, {kind="node"}, ...
//
// A family is created by a Registry (registry.h) from a FamilySpec and owned
// by it. The family owns its children; a pointer returned by Add stays valid
// until Remove(that pointer) or the Registry's destruction, so hot paths look
// a child up once and keep the pointer.
//
// Thread-safety: Add, Remove, Has and Collect take the family's own mutex
// (never a registry-wide one); updating a child (Counter::Increment, ...)
// takes no lock at all.

#ifndef HY_METRICS_FAMILY_H_
#define HY_METRICS_FAMILY_H_

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/metrics/collectable.h"
#include "hy/metrics/counter.h"
#include "hy/metrics/gauge.h"
#include "hy/metrics/histogram.h"
#include "hy/metrics/names.h"

namespace hy::metrics {

// Everything that defines a family. Two registrations of equal specs name
// the same family.
struct FamilySpec {
  std::string name;
  std::string help;  // Required, UTF-8; may contain '\' and newlines.
  MetricType type = MetricType::kGauge;
  // Every child carries exactly these labels (in any order here).
  std::vector<std::string> label_names;
  // Labels with one fixed value, added to every child of the family.
  Labels const_labels;
  BucketBoundaries buckets;  // Histograms only: finite, increasing bounds.
  // Add refuses to create more children than this (label explosion guard).
  size_t max_children = 10000;

  friend bool operator==(const FamilySpec& a, const FamilySpec& b);
};

// Returns OK, or kInvalidArgument explaining what breaks the rules:
//  - the name is a valid metric name without ':' (reserved for recording
//    rules); counters end in "_total", other types do not; only histograms
//    may end in "_bucket", "_sum" or "_count";
//  - help is non-empty valid UTF-8;
//  - label names are valid, distinct, not "le" or "quantile" (reserved for
//    histogram buckets and summaries), and disjoint from const_labels;
//  - const label values are non-empty valid UTF-8;
//  - buckets are set only for histograms and pass ValidateBuckets;
//  - max_children >= 1.
Status ValidateFamilySpec(const FamilySpec& spec);

// The sample names a family writes: its name, plus "_bucket", "_sum" and
// "_count" variants for a histogram.
std::vector<std::string> SampleNames(const FamilySpec& spec);

// Type-erased view of a family, for the Registry.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  virtual const FamilySpec& spec() const = 0;
  // Returns a snapshot of every child, ordered by label set.
  virtual MetricFamilySnapshot Collect() const = 0;
};

template <typename T>
class Family final : public FamilyBase {
 public:
  // REQUIRES: ValidateFamilySpec(spec).ok() and spec.type == T::kType (the
  // Registry checks both before it constructs a family).
  explicit Family(FamilySpec spec) : spec_(std::move(spec)) {}
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  const FamilySpec& spec() const override { return spec_; }
  const std::string& name() const { return spec_.name; }

  // Returns the child with these labels, creating it (at zero) on first use.
  // Returns kInvalidArgument if the label names differ from the family's
  // label_names or a value is empty or not UTF-8, and kResourceExhausted if
  // creating it would exceed max_children.
  Result<T*> Add(const Labels& labels);

  // Returns true if a child with exactly these labels exists.
  bool Has(const Labels& labels) const;

  // Deletes `metric`; the pointer is invalid afterwards. Returns kNotFound
  // if it is not a child of this family.
  Status Remove(T* metric);

  // Number of children.
  size_t size() const;

  MetricFamilySnapshot Collect() const override;

 private:
  const FamilySpec spec_;
  mutable std::mutex mu_;
  std::map<Labels, std::unique_ptr<T>> children_;  // Guarded by mu_.
};

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

}  // namespace hy::metrics

#endif  // HY_METRICS_FAMILY_H_
