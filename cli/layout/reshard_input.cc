#include "layout/reshard_input.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hy/reshard/stored_version.h"
#include "hy/statestore/safetensors.h"
#include "layout/reshard_command.h"

namespace hy::cli {
namespace {

using nlohmann::json;

Result<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound(std::string("cannot open ") + what + " '" + path +
                            "'");
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return Status::IOError(std::string("cannot read ") + what + " '" + path +
                           "'");
  }
  return text.str();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// One entry of a JSON model spec.
Result<TensorMeta> ParseEntry(const json& e, size_t index,
                              const std::string& path) {
  const std::string where = path + ": entry " + std::to_string(index);
  if (!e.is_object()) {
    return Status::InvalidArgument(where + " is not an object");
  }
  for (const auto& [key, value] : e.items()) {
    if (key != "name" && key != "dtype" && key != "shape") {
      return Status::InvalidArgument(where + ": unknown key '" + key +
                                     "' (expected name, dtype, shape)");
    }
  }
  TensorMeta meta;
  const auto name = e.find("name");
  if (name == e.end() || !name->is_string()) {
    return Status::InvalidArgument(where + ": 'name' must be a string");
  }
  meta.name = name->get<std::string>();
  const auto dtype = e.find("dtype");
  if (dtype == e.end() || !dtype->is_string()) {
    return Status::InvalidArgument(where + " ('" + meta.name +
                                   "'): 'dtype' must be a string");
  }
  std::string upper = dtype->get<std::string>();
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  Result<DType> d = DTypeFromSafetensorsName(upper);
  if (!d.ok()) {
    return Status::InvalidArgument(where + " ('" + meta.name +
                                   "'): unknown dtype '" +
                                   dtype->get<std::string>() + "'");
  }
  meta.dtype = *d;
  const auto shape = e.find("shape");
  if (shape == e.end() || !shape->is_array()) {
    return Status::InvalidArgument(where + " ('" + meta.name +
                                   "'): 'shape' must be an array");
  }
  for (const json& dim : *shape) {
    if (!dim.is_number_integer() || dim.get<int64_t>() < 0) {
      return Status::InvalidArgument(
          where + " ('" + meta.name +
          "'): 'shape' must hold non-negative integers");
    }
    meta.shape.push_back(dim.get<int64_t>());
  }
  Status valid = meta.Validate();
  if (!valid.ok()) return valid.WithContext(where);
  return meta;
}

}  // namespace

Result<std::vector<TensorMeta>> ReadModelSpecFile(const std::string& path) {
  if (EndsWith(path, ".safetensors")) {
    HY_ASSIGN_OR_RETURN(auto reader, statestore::SafetensorsReader::Open(path));
    std::vector<TensorMeta> tensors;
    for (const auto& t : reader->tensors()) tensors.push_back(t.meta);
    return reshard::InNaturalOrder(std::move(tensors));
  }
  HY_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "model spec"));
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(path + ": bad JSON: " + e.what());
  }
  if (!j.is_array()) {
    return Status::InvalidArgument(
        path +
        ": expected a JSON array of {\"name\", \"dtype\", \"shape\"} objects");
  }
  std::vector<TensorMeta> tensors;
  for (size_t i = 0; i < j.size(); ++i) {
    HY_ASSIGN_OR_RETURN(TensorMeta meta, ParseEntry(j[i], i, path));
    tensors.push_back(std::move(meta));
  }
  return tensors;
}

Result<reshard::ModelRules> ChooseRules(const std::string& rules_file,
                                        const std::string& recorded) {
  if (!rules_file.empty()) {
    HY_ASSIGN_OR_RETURN(std::string yaml, ReadFile(rules_file, "rules file"));
    Result<reshard::ModelRules> rules = reshard::ModelRules::ParseYaml(yaml);
    if (!rules.ok()) return rules.status().WithContext(rules_file);
    return rules;
  }
  if (!recorded.empty()) {
    Result<reshard::ModelRules> rules =
        reshard::ModelRules::ParseYaml(recorded);
    if (!rules.ok()) return rules.status().WithContext("recorded rules");
    return rules;
  }
  return reshard::ModelRules::Default();
}

Status ExplainUnmatched(const Status& s) {
  const std::string m(s.message());
  if (m.find("no model rule matches") == std::string::npos) return s;
  for (const char* model : {"'actor/", "'critic/", "'reference/"}) {
    if (m.find(model) != std::string::npos) {
      return Status::InvalidArgument(
          m.substr(0, m.find(" (")) +
          " (a tensor of a trainer run: reshard the run root itself, hyctl "
          "reshard RUN_ROOT --to LAYOUT, which cuts each model as its "
          "trainer would; or pass --rules FILE)");
    }
  }
  if (!s.IsNotFound()) return s;
  return Status::InvalidArgument(m +
                                 " (pass --rules FILE with a rule for it; "
                                 "see reshard/rules/llama.yaml)");
}

Result<reshard::ModelSpec> BuildSpec(const std::vector<TensorMeta>& tensors,
                                     const reshard::ModelRules& rules) {
  Result<reshard::ModelSpec> spec = reshard::ModelSpec::Build(tensors, rules);
  if (!spec.ok()) return ExplainUnmatched(spec.status());
  return spec;
}

}  // namespace hy::cli
