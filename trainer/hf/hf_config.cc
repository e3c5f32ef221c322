// config.json -> ModelConfig (see hf_model.h).

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hy/trainer/hf/hf_model.h"

namespace hy::trainer {
namespace {

using Json = nlohmann::json;

class ConfigReader {
 public:
  ConfigReader(const Json& j, std::string where)
      : j_(j), where_(std::move(where)) {}

  Status Bad(const std::string& field, const std::string& what) const {
    return Status::InvalidArgument(where_ + ": " + field + " " + what);
  }

  // Reads `key` into *out if present (absent keeps the default).
  template <typename T>
  Status Read(const char* key, T* out, bool required = false) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      return required ? Bad(key, "is missing") : Status::OK();
    }
    if constexpr (std::is_same_v<T, bool>) {
      if (!it->is_boolean()) return Bad(key, "must be true or false");
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!it->is_string()) return Bad(key, "must be a string");
    } else if constexpr (std::is_integral_v<T>) {
      if (!it->is_number_integer()) return Bad(key, "must be an integer");
    } else {
      if (!it->is_number()) return Bad(key, "must be a number");
    }
    *out = it->get<T>();
    return Status::OK();
  }

 private:
  const Json& j_;
  std::string where_;
};

// The rotary embedding's object `field` (rope_parameters: rope_theta, the
// type and its parameters; rope_scaling: the type and its parameters):
// default or llama3 with its four parameters.
Status ReadRopeType(const Json& j, const ConfigReader& top,
                    const std::string& field, const std::string& where,
                    ModelConfig* m) {
  if (!j.is_object()) return top.Bad(field, "must be an object");
  ConfigReader r(j, where + ": " + field);
  HY_RETURN_IF_ERROR(r.Read("rope_theta", &m->rope_theta));
  std::string type;
  HY_RETURN_IF_ERROR(r.Read("rope_type", &type));
  if (type.empty()) HY_RETURN_IF_ERROR(r.Read("type", &type));
  if (type == "default") return Status::OK();
  if (type != "llama3") {
    return top.Bad(field + ".rope_type",
                   "\"" + type + "\" is not implemented (supported: llama3)");
  }
  m->rope_scaling_type = type;
  HY_RETURN_IF_ERROR(r.Read("factor", &m->rope_scaling_factor, true));
  HY_RETURN_IF_ERROR(r.Read("low_freq_factor", &m->rope_low_freq_factor, true));
  HY_RETURN_IF_ERROR(
      r.Read("high_freq_factor", &m->rope_high_freq_factor, true));
  return r.Read("original_max_position_embeddings",
                &m->rope_original_max_position_embeddings, true);
}

// transformers 5 writes rope_parameters; transformers 4 wrote rope_theta
// and rope_scaling at the top level. rope_parameters wins when present.
Status ReadRope(const Json& j, const ConfigReader& top,
                const std::string& where, ModelConfig* m) {
  HY_RETURN_IF_ERROR(top.Read("rope_theta", &m->rope_theta));
  for (const char* field : {"rope_parameters", "rope_scaling"}) {
    auto it = j.find(field);
    if (it != j.end() && !it->is_null()) {
      return ReadRopeType(*it, top, field, where, m);
    }
  }
  return Status::OK();
}

// Fields that change the math in ways hy does not implement.
Status RefuseUnimplemented(const Json& j, const ConfigReader& r) {
  std::string act = "silu";
  HY_RETURN_IF_ERROR(r.Read("hidden_act", &act));
  if (act != "silu") {
    return r.Bad("hidden_act", "\"" + act + "\" is not implemented (silu)");
  }
  bool sliding = false;
  HY_RETURN_IF_ERROR(r.Read("use_sliding_window", &sliding));
  if (sliding) return r.Bad("use_sliding_window", "true is not implemented");
  double dropout = 0;
  HY_RETURN_IF_ERROR(r.Read("attention_dropout", &dropout));
  if (dropout != 0) {
    return r.Bad("attention_dropout", "must be 0 (dropout is not implemented)");
  }
  auto types = j.find("layer_types");
  if (types != j.end() && types->is_array()) {
    for (const auto& t : *types) {
      if (t != "full_attention") {
        return r.Bad(
            "layer_types",
            "holds " + t.dump() + " (only full_attention is implemented)");
      }
    }
  }
  return Status::OK();
}

}  // namespace

Result<ModelConfig> ParseHfConfig(const std::string& text,
                                  const std::string& where) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::DataLoss(where + ": not a JSON object");
  }
  ConfigReader r(j, where);
  ModelConfig m;
  auto arch = j.find("architectures");
  if (arch == j.end() || !arch->is_array() || arch->size() != 1 ||
      !(*arch)[0].is_string()) {
    return r.Bad("architectures", "must list exactly one architecture");
  }
  m.architecture = (*arch)[0].get<std::string>();
  if (m.architecture != kLlamaArch && m.architecture != kQwen2Arch &&
      m.architecture != kQwen3Arch) {
    return r.Bad("architectures",
                 "\"" + m.architecture + "\" is not supported (supported: " +
                     std::string(kLlamaArch) + ", " + std::string(kQwen2Arch) +
                     ", " + std::string(kQwen3Arch) + ")");
  }
  HY_RETURN_IF_ERROR(r.Read("vocab_size", &m.vocab_size, true));
  HY_RETURN_IF_ERROR(r.Read("hidden_size", &m.hidden_size, true));
  HY_RETURN_IF_ERROR(r.Read("intermediate_size", &m.intermediate_size, true));
  HY_RETURN_IF_ERROR(r.Read("num_hidden_layers", &m.num_layers, true));
  HY_RETURN_IF_ERROR(r.Read("num_attention_heads", &m.num_heads, true));
  m.num_kv_heads = m.num_heads;
  HY_RETURN_IF_ERROR(r.Read("num_key_value_heads", &m.num_kv_heads));
  HY_RETURN_IF_ERROR(r.Read("head_dim", &m.head_dim_override));
  HY_RETURN_IF_ERROR(r.Read("rms_norm_eps", &m.rms_norm_eps, true));
  HY_RETURN_IF_ERROR(
      r.Read("max_position_embeddings", &m.max_position_embeddings, true));
  HY_RETURN_IF_ERROR(r.Read("attention_bias", &m.attention_bias));
  HY_RETURN_IF_ERROR(r.Read("mlp_bias", &m.mlp_bias));
  HY_RETURN_IF_ERROR(r.Read("tie_word_embeddings", &m.tie_word_embeddings));
  std::string dtype;
  HY_RETURN_IF_ERROR(r.Read("torch_dtype", &dtype));
  if (dtype.empty()) HY_RETURN_IF_ERROR(r.Read("dtype", &dtype));
  if (!dtype.empty()) m.torch_dtype = dtype;
  HY_RETURN_IF_ERROR(ReadRope(j, r, where, &m));
  HY_RETURN_IF_ERROR(RefuseUnimplemented(j, r));
  if (m.family() == ModelFamily::kQwen2) m.attention_bias = false;
  Status valid = ValidateModelConfig(m);
  if (!valid.ok()) {
    return Status::InvalidArgument(where + ": " + std::string(valid.message()));
  }
  return m;
}

Result<ModelConfig> ReadHfConfig(const std::string& dir) {
  ModelConfig m;
  m.path = dir;
  HY_RETURN_IF_ERROR(ResolveModelPath(&m, nullptr));
  return m;
}

std::vector<int> HfEosTokenIds(const std::string& config_json) {
  std::vector<int> out;
  Json j = Json::parse(config_json, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("eos_token_id")) {
    return out;
  }
  const Json& e = j["eos_token_id"];
  for (const Json& id : e.is_array() ? e : Json::array({e})) {
    if (id.is_number_integer()) out.push_back(id.get<int>());
  }
  return out;
}

std::vector<int> HfModelEosIds(const std::string& dir,
                               const std::string& config_json) {
  std::vector<int> out = HfEosTokenIds(config_json);
  if (dir.empty()) return out;
  std::ifstream in(dir + "/generation_config.json", std::ios::binary);
  if (!in) return out;
  std::stringstream text;
  text << in.rdbuf();
  for (int id : HfEosTokenIds(text.str())) {
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  }
  return out;
}

Status ResolveModelPath(ModelConfig* config, std::string* config_json) {
  if (config->path.empty()) return Status::OK();
  const std::string file = config->path + "/config.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status::NotFound(file + ": cannot open (no config.json)");
  std::stringstream text;
  text << in.rdbuf();
  HY_ASSIGN_OR_RETURN(ModelConfig m, ParseHfConfig(text.str(), file));
  m.path = config->path;
  *config = std::move(m);
  if (config_json != nullptr) *config_json = text.str();
  return Status::OK();
}

}  // namespace hy::trainer
