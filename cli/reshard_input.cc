#include "reshard_input.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hy/statestore/safetensors.h"
#include "reshard_command.h"

namespace hy::cli {
namespace {

using nlohmann::json;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

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

std::vector<TensorMeta> NaturalOrder(std::vector<TensorMeta> tensors) {
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const TensorMeta& a, const TensorMeta& b) {
                     return NaturalLess(a.name, b.name);
                   });
  return tensors;
}

}  // namespace

bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (IsDigit(a[i]) && IsDigit(b[j])) {
      size_t ei = i, ej = j;
      while (ei < a.size() && IsDigit(a[ei])) ++ei;
      while (ej < b.size() && IsDigit(b[ej])) ++ej;
      // Compare the numbers without their leading zeros: first by length.
      size_t si = i, sj = j;
      while (si + 1 < ei && a[si] == '0') ++si;
      while (sj + 1 < ej && b[sj] == '0') ++sj;
      if (ei - si != ej - sj) return ei - si < ej - sj;
      const int c = a.compare(si, ei - si, b, sj, ej - sj);
      if (c != 0) return c < 0;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) {
        return static_cast<unsigned char>(a[i]) <
               static_cast<unsigned char>(b[j]);
      }
      ++i;
      ++j;
    }
  }
  if (i < a.size() || j < b.size()) return i == a.size();  // A prefix.
  return a < b;
}

Result<std::vector<TensorMeta>> ReadModelSpecFile(const std::string& path) {
  if (EndsWith(path, ".safetensors")) {
    HY_ASSIGN_OR_RETURN(auto reader, statestore::SafetensorsReader::Open(path));
    std::vector<TensorMeta> tensors;
    for (const auto& t : reader->tensors()) tensors.push_back(t.meta);
    return NaturalOrder(std::move(tensors));
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

Result<std::vector<TensorMeta>> StoredTensors(
    statestore::Store* store, uint64_t version,
    const statestore::Manifest& manifest) {
  std::vector<TensorMeta> tensors;
  for (const auto& [name, t] : manifest.tensors) tensors.push_back(t.meta);
  const bool has_order =
      std::any_of(manifest.blobs.begin(), manifest.blobs.end(),
                  [](const statestore::BlobEntry& b) {
                    return b.name == kTensorOrderBlob &&
                           b.rank == statestore::kReplicatedBlob;
                  });
  if (!has_order) return NaturalOrder(std::move(tensors));

  HY_ASSIGN_OR_RETURN(std::string blob,
                      store->ReadBlob(version, kTensorOrderBlob));
  const std::string bad = std::string("version ") + std::to_string(version) +
                          ": blob '" + kTensorOrderBlob + "' ";
  std::vector<std::string> names;
  try {
    names = json::parse(blob).get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    return Status::DataLoss(bad + "is not a JSON array of names: " + e.what());
  }
  std::vector<TensorMeta> ordered;
  std::set<std::string> seen;
  for (const std::string& name : names) {
    auto it = manifest.tensors.find(name);
    if (it == manifest.tensors.end() || !seen.insert(name).second) {
      return Status::DataLoss(bad + "names '" + name +
                              "', which is no tensor or is named twice");
    }
    ordered.push_back(it->second.meta);
  }
  if (ordered.size() != tensors.size()) {
    return Status::DataLoss(bad + "lists " + std::to_string(ordered.size()) +
                            " of the " + std::to_string(tensors.size()) +
                            " tensors");
  }
  return ordered;
}

std::string TensorOrderJson(const reshard::ModelSpec& spec) {
  json names = json::array();
  for (const auto& t : spec.tensors) names.push_back(t.meta.name);
  return names.dump();
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

Result<reshard::ModelSpec> BuildSpec(const std::vector<TensorMeta>& tensors,
                                     const reshard::ModelRules& rules) {
  Result<reshard::ModelSpec> spec = reshard::ModelSpec::Build(tensors, rules);
  if (!spec.ok() && spec.status().IsNotFound()) {
    return Status::InvalidArgument(std::string(spec.status().message()) +
                                   " (pass --rules FILE with a rule for it; "
                                   "see reshard/rules/llama.yaml)");
  }
  return spec;
}

}  // namespace hy::cli
