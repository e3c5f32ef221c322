#include "layout/run_models.h"

#include <algorithm>
#include <map>

#include "hy/checkpoint/checkpoint.h"
#include "hy/reshard/stored_version.h"
#include "hy/trainer/config/config.h"
#include "hy/trainer/config/model_config.h"
#include "layout/reshard_input.h"

namespace hy::cli {
namespace {

// "actor" of "actor/exp_avg/".
std::string ModelOf(const std::string& prefix) {
  return prefix.substr(0, prefix.find('/'));
}

// The trainer's flattening order of `model`'s tensors, by Hugging Face
// name; empty when the run records no trainer config.
Result<std::vector<std::string>> TrainerOrder(
    checkpoint::CheckpointReader* reader, const std::string& model) {
  Result<std::string> text = reader->ReadBlob("trainer.config");
  if (text.status().IsNotFound()) return std::vector<std::string>();
  HY_RETURN_IF_ERROR(text.status());
  Result<trainer::TrainConfig> config = trainer::ParseConfigYaml(*text);
  if (!config.ok()) {
    return Status::DataLoss("the step's trainer.config: " +
                            std::string(config.status().message()));
  }
  const trainer::ModelRole role = model == "critic"
                                      ? trainer::ModelRole::kCritic
                                      : trainer::ModelRole::kActor;
  std::vector<std::string> names;
  for (const TensorMeta& t : trainer::ModelTensors(config->model, role)) {
    names.push_back(t.name);
  }
  return names;
}

}  // namespace

Result<std::vector<RunModel>> RunModelsOf(checkpoint::CheckpointReader* reader,
                                          const std::string& rules_file) {
  Result<reshard::ModelRules> chosen =
      ChooseRules(rules_file, reader->commit().model_rules);
  if (!chosen.ok() && rules_file.empty()) {
    return Status::DataLoss("the step's recorded split rules do not parse (" +
                            std::string(chosen.status().message()) + ")");
  }
  HY_ASSIGN_OR_RETURN(reshard::ModelRules rules, std::move(chosen));
  // Prefix -> tensors under it, names without the prefix.
  std::map<std::string, std::vector<TensorMeta>> groups;
  for (const std::string& name : reader->TensorNames()) {
    HY_ASSIGN_OR_RETURN(TensorMeta meta, reader->FindTensor(name));
    const size_t slash = name.rfind('/');
    const std::string prefix =
        slash == std::string::npos ? "" : name.substr(0, slash + 1);
    meta.name = name.substr(prefix.size());
    groups[prefix].push_back(std::move(meta));
  }
  std::map<std::string, std::vector<std::string>> orders;  // By model.
  std::vector<RunModel> out;
  for (auto& [prefix, tensors] : groups) {
    const std::string model = ModelOf(prefix);
    if (!orders.count(model)) {
      HY_ASSIGN_OR_RETURN(orders[model], TrainerOrder(reader, model));
    }
    const std::vector<std::string>& order = orders[model];
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < order.size(); ++i) index[order[i]] = i;
    const bool known =
        !order.empty() &&
        std::all_of(tensors.begin(), tensors.end(), [&](const TensorMeta& t) {
          return index.count(t.name) > 0;
        });
    if (known) {
      std::sort(tensors.begin(), tensors.end(),
                [&](const TensorMeta& a, const TensorMeta& b) {
                  return index[a.name] < index[b.name];
                });
    } else {
      tensors = reshard::InNaturalOrder(std::move(tensors));
    }
    // Rules for the stored names (the trainer records such), else for the
    // Hugging Face names (a rules file for the model, the shipped rules).
    std::vector<TensorMeta> full = tensors;
    for (TensorMeta& t : full) t.name = prefix + t.name;
    Result<reshard::ModelSpec> spec = reshard::ModelSpec::Build(full, rules);
    if (!spec.ok() && spec.status().IsNotFound()) {
      spec = BuildSpec(tensors, rules);
      if (spec.ok()) {
        for (reshard::TensorSpec& t : spec->tensors) {
          t.meta.name = prefix + t.meta.name;
        }
      }
    }
    if (!spec.ok()) {
      return spec.status().WithContext(prefix.empty() ? "the run's tensors"
                                                      : "tensors " + prefix);
    }
    out.push_back({prefix, std::move(spec).value()});
  }
  return out;
}

Result<reshard::ShardMap> CutModel(const RunModel& model,
                                   const reshard::Layout& layout) {
  Result<reshard::ShardMap> map = reshard::ShardMap::Build(layout, model.spec);
  if (!map.ok()) {
    return map.status().WithContext(
        "layout " + layout.ToString() +
        (model.prefix.empty() ? "" : " for tensors " + model.prefix));
  }
  return map;
}

}  // namespace hy::cli
