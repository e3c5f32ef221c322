#include "state_source.h"

#include <iostream>

#include "hy/checkpoint/checkpoint.h"
#include "hy/recovery/run_root.h"
#include "hy/statestore/store.h"
#include "run_path.h"

namespace hy::cli {
namespace {

class StoreSource : public StateSource {
 public:
  StoreSource(std::unique_ptr<statestore::Store> store, uint64_t version,
              statestore::Manifest manifest)
      : store_(std::move(store)),
        version_(version),
        manifest_(std::move(manifest)) {}

  std::string Describe() const override {
    return "store " + store_->path() + " step " +
           std::to_string(manifest_.commit.step);
  }
  std::vector<TensorMeta> Tensors() const override {
    std::vector<TensorMeta> out;
    for (const auto& [name, t] : manifest_.tensors) out.push_back(t.meta);
    return out;
  }
  Status ReadRegion(const std::string& tensor, FlatRun region,
                    MutableBytes out) override {
    return store_->ReadRegion(version_, tensor, region, out);
  }
  Result<std::string> ReadBlob(const std::string& name) override {
    return store_->ReadBlob(version_, name);
  }

 private:
  std::unique_ptr<statestore::Store> store_;
  uint64_t version_;
  statestore::Manifest manifest_;
};

class RunSource : public StateSource {
 public:
  RunSource(std::string root, std::unique_ptr<checkpoint::CheckpointReader> r)
      : root_(std::move(root)), reader_(std::move(r)) {}
  // Says which damaged copies were passed over (CheckpointReader).
  ~RunSource() override {
    for (const std::string& f : reader_->fallbacks()) {
      std::cerr << "hyctl: " << f << "\n";
    }
  }

  std::string Describe() const override {
    return "run root " + root_ + " step " + std::to_string(reader_->step());
  }
  std::vector<TensorMeta> Tensors() const override {
    std::vector<TensorMeta> out;
    for (const std::string& name : reader_->TensorNames()) {
      Result<TensorMeta> m = reader_->FindTensor(name);
      if (m.ok()) out.push_back(*m);
    }
    return out;
  }
  Status ReadRegion(const std::string& tensor, FlatRun region,
                    MutableBytes out) override {
    return reader_->ReadRegion(tensor, region, out);
  }
  Result<std::string> ReadBlob(const std::string& name) override {
    return reader_->ReadBlob(name);
  }

 private:
  std::string root_;
  std::unique_ptr<checkpoint::CheckpointReader> reader_;
};

}  // namespace

Result<std::unique_ptr<StateSource>> OpenStateSource(
    const std::string& path, const VersionChoice& choice,
    bool allow_other_run) {
  if (recovery::RunRoot::Is(path)) {
    HY_RETURN_IF_ERROR(RequireStepForRunRoot(path, choice));
    const std::optional<uint64_t>& n = choice.step;
    HY_ASSIGN_OR_RETURN(auto reader,
                        checkpoint::CheckpointReader::Open(
                            path, n ? static_cast<int64_t>(*n) : -1,
                            /*generation=*/-1, allow_other_run));
    return std::unique_ptr<StateSource>(
        std::make_unique<RunSource>(path, std::move(reader)));
  }
  statestore::StoreOptions o;
  o.read_only = true;
  o.create_if_missing = false;
  HY_ASSIGN_OR_RETURN(auto store, statestore::Store::Open(path, o));
  HY_ASSIGN_OR_RETURN(ChosenVersion chosen, ChooseVersion(store.get(), choice));
  const uint64_t version = chosen.version;
  HY_ASSIGN_OR_RETURN(statestore::Manifest m, store->ReadManifest(version));
  HY_RETURN_IF_ERROR(CheckWholeStore(path, m.commit, store->run_id()));
  return std::unique_ptr<StateSource>(
      std::make_unique<StoreSource>(std::move(store), version, std::move(m)));
}

}  // namespace hy::cli
