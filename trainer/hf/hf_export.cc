// WriteHfDirectory (see hf_export.h).

#include "hy/trainer/hf/hf_export.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hy/common/bf16.h"
#include "hy/statestore/safetensors.h"
#include "hy/trainer/data/special_tokens.h"

namespace hy::trainer {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

std::string TorchDtype(DType d) {
  return d == DType::kBF16 ? "bfloat16" : "float32";
}

const char* ModelType(const ModelConfig& m) {
  switch (m.family()) {
    case ModelFamily::kQwen2:
      return "qwen2";
    case ModelFamily::kQwen3:
      return "qwen3";
    default:
      return "llama";
  }
}

std::string ClassifierArch(const ModelConfig& m) {
  const std::string a = m.architecture;
  return a.substr(0, a.size() - std::string("ForCausalLM").size()) +
         "ForSequenceClassification";
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::IOError("cannot write " + path);
  return Status::OK();
}

Result<Json> ParseObject(const std::string& text, const char* what) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument(std::string("the run's ") + what +
                                   " is not a JSON object");
  }
  return j;
}

Json IdOrNull(int id) { return id >= 0 ? Json(id) : Json(nullptr); }

Result<Json> ConfigJson(const HfExportOptions& o) {
  Json j;
  if (o.source_config_json.empty()) {
    j = Json::parse(HfConfigJson(o));
  } else {
    HY_ASSIGN_OR_RETURN(j, ParseObject(o.source_config_json, "config.json"));
  }
  if (j.contains("dtype")) j["dtype"] = TorchDtype(o.dtype);
  j["torch_dtype"] = TorchDtype(o.dtype);
  if (o.role == ModelRole::kCritic) {
    j["architectures"] = {ClassifierArch(o.model)};
    j["num_labels"] = 1;
  }
  if (o.tokens) {  // config.json holds one eos, the tokenizer's.
    j["bos_token_id"] = IdOrNull(o.tokens->bos);
    j["eos_token_id"] = o.tokens->eos.front();
    j["pad_token_id"] = IdOrNull(o.tokens->pad);
  }
  return j;
}

Result<Json> GenerationConfig(const HfExportOptions& o, const Json& config) {
  Json g = {{"_from_model_config", true}};
  if (!o.source_generation_config_json.empty()) {
    HY_ASSIGN_OR_RETURN(g, ParseObject(o.source_generation_config_json,
                                       "generation_config.json"));
  }
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    if (config.contains(key) && !config[key].is_null()) g[key] = config[key];
  }
  if (o.tokens) {
    g["bos_token_id"] = IdOrNull(o.tokens->bos);
    g["eos_token_id"] = o.tokens->eos.size() == 1 ? Json(o.tokens->eos[0])
                                                  : Json(o.tokens->eos);
    g["pad_token_id"] = IdOrNull(o.tokens->pad);
  }
  return g;
}

// Tensors grouped into shards of at most max_bytes (a larger tensor alone).
std::vector<std::vector<TensorMeta>> Shards(const std::vector<TensorMeta>& ts,
                                            uint64_t max_bytes, size_t esize) {
  std::vector<std::vector<TensorMeta>> out(1);
  uint64_t filled = 0;
  for (TensorMeta t : ts) {
    const uint64_t bytes = static_cast<uint64_t>(*t.NumElements()) * esize;
    if (!out.back().empty() && filled + bytes > max_bytes) {
      out.emplace_back();
      filled = 0;
    }
    out.back().push_back(t);
    filled += bytes;
  }
  return out;
}

std::string ShardName(size_t k, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", k + 1, n);
  return buf;
}

}  // namespace

std::string HfConfigJson(const HfExportOptions& o) {
  const ModelConfig& m = o.model;
  Json j = {
      {"architectures", {m.architecture}},
      {"model_type", ModelType(m)},
      {"vocab_size", m.vocab_size},
      {"hidden_size", m.hidden_size},
      {"intermediate_size", m.intermediate_size},
      {"num_hidden_layers", m.num_layers},
      {"num_attention_heads", m.num_heads},
      {"num_key_value_heads", m.num_kv_heads},
      {"head_dim", m.head_dim()},
      {"max_position_embeddings", m.max_position_embeddings},
      {"rms_norm_eps", m.rms_norm_eps},
      {"rope_theta", m.rope_theta},
      {"hidden_act", "silu"},
      {"attention_bias",
       m.family() == ModelFamily::kQwen2 ? false : m.attention_bias},
      {"attention_dropout", 0.0},
      {"tie_word_embeddings", m.tie_word_embeddings},
      {"torch_dtype", TorchDtype(o.dtype)},
      {"use_cache", true},
  };
  if (m.family() == ModelFamily::kLlama) j["mlp_bias"] = m.mlp_bias;
  if (m.family() != ModelFamily::kLlama) j["use_sliding_window"] = false;
  if (m.rope_scaling_type.empty()) {
    j["rope_scaling"] = nullptr;
  } else {
    j["rope_scaling"] = {{"rope_type", m.rope_scaling_type},
                         {"factor", m.rope_scaling_factor},
                         {"low_freq_factor", m.rope_low_freq_factor},
                         {"high_freq_factor", m.rope_high_freq_factor},
                         {"original_max_position_embeddings",
                          m.rope_original_max_position_embeddings}};
  }
  return j.dump(2);
}

Result<HfExportResult> WriteHfDirectory(
    const std::string& out, const HfExportOptions& o,
    const std::function<Status(const TensorMeta&, float*)>& read) {
  if (o.dtype != DType::kF32 && o.dtype != DType::kBF16) {
    return Status::InvalidArgument("export dtype must be F32 or BF16");
  }
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return Status::IOError("cannot create " + out + ": " + ec.message());
  HfExportResult result;
  const size_t esize = DTypeSize(o.dtype);
  std::vector<TensorMeta> metas = ModelTensors(o.model, o.role);
  for (TensorMeta& m : metas) m.dtype = o.dtype;
  const auto shards = Shards(metas, o.max_shard_bytes, esize);
  Json weight_map = Json::object();
  std::vector<float> f32;
  std::vector<uint8_t> bytes;
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string name =
        shards.size() == 1 ? "model.safetensors" : ShardName(k, shards.size());
    HY_ASSIGN_OR_RETURN(auto writer,
                        statestore::SafetensorsWriter::Create(
                            out + "/" + name, shards[k], {{"format", "pt"}}));
    for (const auto& t : writer->tensors()) {
      const size_t n = static_cast<size_t>(*t.meta.NumElements());
      f32.resize(n);
      HY_RETURN_IF_ERROR(read(t.meta, f32.data()));
      const uint8_t* src = reinterpret_cast<const uint8_t*>(f32.data());
      if (o.dtype == DType::kBF16) {
        bytes.resize(2 * n);
        CastF32ToBf16(src, bytes.data(), n);
        src = bytes.data();
      }
      HY_RETURN_IF_ERROR(
          writer->Append(t.meta.name, ConstBytes(src, n * esize)));
      weight_map[t.meta.name] = name;
      result.tensor_bytes += n * esize;
      ++result.num_tensors;
    }
    HY_RETURN_IF_ERROR(writer->Finish());
    result.files.push_back(name);
  }
  if (shards.size() > 1) {
    Json index = {{"metadata", {{"total_size", result.tensor_bytes}}},
                  {"weight_map", weight_map}};
    HY_RETURN_IF_ERROR(
        WriteText(out + "/model.safetensors.index.json", index.dump(2)));
    result.files.push_back("model.safetensors.index.json");
  }
  HY_ASSIGN_OR_RETURN(Json config, ConfigJson(o));
  HY_RETURN_IF_ERROR(WriteText(out + "/config.json", config.dump(2) + "\n"));
  result.files.push_back("config.json");
  HY_ASSIGN_OR_RETURN(Json generation, GenerationConfig(o, config));
  HY_RETURN_IF_ERROR(
      WriteText(out + "/generation_config.json", generation.dump(2) + "\n"));
  result.files.push_back("generation_config.json");
  if (!o.tokenizer_dir.empty()) {
    for (const std::string& f : TokenizerFileNames()) {
      const fs::path src = fs::path(o.tokenizer_dir) / f;
      if (!fs::exists(src)) continue;
      fs::copy_file(src, fs::path(out) / f,
                    fs::copy_options::overwrite_existing, ec);
      if (ec) {
        return Status::IOError("cannot copy " + src.string() + ": " +
                               ec.message());
      }
      result.files.push_back(f);
    }
  }
  return result;
}

}  // namespace hy::trainer
