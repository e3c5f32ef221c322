#include "hy/metrics/registry.h"

#include <set>

namespace hy::metrics {

template <typename T>
Result<Family<T>*> Registry::Add(FamilySpec spec) {
  spec.type = T::kType;
  HY_RETURN_IF_ERROR(ValidateFamilySpec(spec));
  std::vector<std::string> wanted = SampleNames(spec);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& family : families_) {
    const FamilySpec& existing = family->spec();
    if (existing == spec) {
      return static_cast<Family<T>*>(family.get());
    }
    std::vector<std::string> taken = SampleNames(existing);
    std::set<std::string> taken_set(taken.begin(), taken.end());
    for (const std::string& name : wanted) {
      if (taken_set.count(name) != 0) {
        return Status::AlreadyExists(
            "metric \"" + spec.name + "\" (" +
            std::string(MetricTypeName(spec.type)) + ") collides on \"" + name +
            "\" with the registered " +
            std::string(MetricTypeName(existing.type)) + " \"" + existing.name +
            "\", whose spec differs");
      }
    }
  }
  auto family = std::make_unique<Family<T>>(std::move(spec));
  Family<T>* raw = family.get();
  families_.push_back(std::move(family));
  return raw;
}

template Result<Family<Counter>*> Registry::Add<Counter>(FamilySpec);
template Result<Family<Gauge>*> Registry::Add<Gauge>(FamilySpec);
template Result<Family<Histogram>*> Registry::Add<Histogram>(FamilySpec);

std::vector<MetricFamilySnapshot> Registry::Collect() const {
  std::vector<const FamilyBase*> families;
  {
    std::lock_guard<std::mutex> lock(mu_);
    families.reserve(families_.size());
    for (const auto& f : families_) families.push_back(f.get());
  }
  // Families are never removed, so the pointers stay valid without the lock.
  std::vector<MetricFamilySnapshot> out;
  out.reserve(families.size());
  for (const FamilyBase* f : families) out.push_back(f->Collect());
  return out;
}

std::vector<FamilySpec> Registry::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FamilySpec> specs;
  specs.reserve(families_.size());
  for (const auto& f : families_) specs.push_back(f->spec());
  return specs;
}

size_t Registry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return families_.size();
}

}  // namespace hy::metrics
