// Registry: the set of metric families a process (or a part of it) exports,
// modelled on prometheus-cpp's Registry but stricter: names, labels, help and
// buckets are checked when a family is registered, a family's label names
// are fixed, and two families can never write the same sample name.
//
//   auto registry = std::make_shared<hy::metrics::Registry>();
//   HY_ASSIGN_OR_RETURN(auto* bytes,
//                       hy::metrics::BuildCounter()
//                           .Name("hy_reshard_bytes_total")
//                           .Help("Bytes moved by reshards.")
//                           .LabelNames({"kind"})
//                           .Register(*registry));
//   HY_ASSIGN_OR_RETURN(hy::metrics::Counter * local,
//                       bytes->Add({{"kind", "local"}}));
//   local->Increment(4096);
//
// Ownership: the Registry owns its families (and they their metrics); the
// Family pointers it returns are valid for the Registry's lifetime. Share a
// Registry with an Exposer or Gateway through std::shared_ptr: they hold it
// weakly.
//
// Thread-safety: every method may be called from any thread. Registration
// takes the registry's mutex; Collect takes it to list the families and then
// each family's own mutex in turn; updating a metric takes no lock.

#ifndef HY_METRICS_REGISTRY_H_
#define HY_METRICS_REGISTRY_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/metrics/collectable.h"
#include "hy/metrics/family.h"

namespace hy::metrics {

class Registry : public Collectable {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registers the family described by `spec` (spec.type is set from T).
  // Returns the existing family if one with an equal spec is registered
  // already (so modules may register what they use idempotently).
  // Returns kInvalidArgument if ValidateFamilySpec fails, and kAlreadyExists
  // if the name, or a sample name of it (a histogram's "_bucket", "_sum",
  // "_count"), is used by a different family.
  template <typename T>
  Result<Family<T>*> Add(FamilySpec spec);

  // Families in registration order, each with its children ordered by
  // label set.
  std::vector<MetricFamilySnapshot> Collect() const override;

  // The specs of the registered families, in registration order (what a
  // reference listing such as `hyctl metrics -o table` shows).
  std::vector<FamilySpec> Describe() const;

  // Number of registered families.
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_;  // Guarded by mu_.
};

extern template Result<Family<Counter>*> Registry::Add<Counter>(FamilySpec);
extern template Result<Family<Gauge>*> Registry::Add<Gauge>(FamilySpec);
extern template Result<Family<Histogram>*> Registry::Add<Histogram>(FamilySpec);

// Fluent construction of a FamilySpec, as in prometheus-cpp:
// BuildCounter().Name(...).Help(...).Register(registry).
template <typename T>
class FamilyBuilder {
 public:
  FamilyBuilder& Name(std::string name) {
    spec_.name = std::move(name);
    return *this;
  }
  FamilyBuilder& Help(std::string help) {
    spec_.help = std::move(help);
    return *this;
  }
  FamilyBuilder& LabelNames(std::vector<std::string> names) {
    spec_.label_names = std::move(names);
    return *this;
  }
  FamilyBuilder& ConstLabels(Labels labels) {
    spec_.const_labels = std::move(labels);
    return *this;
  }
  // Histograms only (Register fails for other types with buckets set).
  FamilyBuilder& Buckets(BucketBoundaries bounds) {
    spec_.buckets = std::move(bounds);
    return *this;
  }
  FamilyBuilder& MaxChildren(size_t n) {
    spec_.max_children = n;
    return *this;
  }
  const FamilySpec& spec() const { return spec_; }

  // Returns what Registry::Add<T> returns.
  Result<Family<T>*> Register(Registry& registry) const {
    return registry.Add<T>(spec_);
  }

 private:
  FamilySpec spec_;
};

inline FamilyBuilder<Counter> BuildCounter() { return {}; }
inline FamilyBuilder<Gauge> BuildGauge() { return {}; }
inline FamilyBuilder<Histogram> BuildHistogram() { return {}; }

}  // namespace hy::metrics

#endif  // HY_METRICS_REGISTRY_H_
