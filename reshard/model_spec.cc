// ModelSpec: the model's tensors with their splits (see model_spec.h).

#include "hy/reshard/model_spec.h"

#include <algorithm>
#include <unordered_set>

namespace hy::reshard {

Result<ModelSpec> ModelSpec::Build(const std::vector<TensorMeta>& tensors,
                                   const ModelRules& rules) {
  ModelSpec spec;
  spec.tensors.reserve(tensors.size());
  std::unordered_set<std::string> names;
  for (const TensorMeta& meta : tensors) {
    HY_RETURN_IF_ERROR(meta.Validate());  // The message names the tensor.
    if (!names.insert(meta.name).second) {
      return Status::InvalidArgument("duplicate tensor name '" + meta.name +
                                     "'");
    }
    TensorSpec t;
    t.meta = meta;
    HY_RETURN_IF_ERROR(rules.Match(meta.name, &t.tp_dim, &t.stage));
    if (t.tp_dim >= static_cast<int>(meta.shape.size())) {
      return Status::InvalidArgument("tensor " + meta.DebugString() +
                                     ": tp_dim " + std::to_string(t.tp_dim) +
                                     " is not below its rank " +
                                     std::to_string(meta.shape.size()));
    }
    spec.tensors.push_back(std::move(t));
  }
  return spec;
}

int ModelSpec::Find(const std::string& name) const {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].meta.name == name) return static_cast<int>(i);
  }
  return -1;
}

int ModelSpec::NumLayers() const {
  int layers = 0;
  for (const TensorSpec& t : tensors) {
    if (t.stage.kind == StageRule::Kind::kLayer) {
      layers = std::max(layers, t.stage.layer + 1);
    }
  }
  return layers;
}

int ModelSpec::StageOf(int i, int pp) const {
  const StageRule& stage = tensors[i].stage;
  switch (stage.kind) {
    case StageRule::Kind::kAll:
      return -1;
    case StageRule::Kind::kFirst:
      return 0;
    case StageRule::Kind::kLast:
      return pp - 1;
    case StageRule::Kind::kLayer:
      break;
  }
  const int64_t layers = NumLayers();  // >= stage.layer + 1 >= 1.
  return static_cast<int>(int64_t{stage.layer} * pp / layers);
}

int64_t ModelSpec::TotalBytes() const {
  int64_t total = 0;
  for (const TensorSpec& t : tensors) total += t.meta.ByteSize().value_or(0);
  return total;
}

}  // namespace hy::reshard
