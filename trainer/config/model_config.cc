#include "hy/trainer/config/model_config.h"

#include <string>
#include <tuple>

namespace hy::trainer {
namespace {

Status Bad(const std::string& field, const std::string& what) {
  return Status::InvalidArgument("model." + field + " " + what);
}

}  // namespace

ModelFamily ModelConfig::family() const {
  if (architecture == kQwen2Arch) return ModelFamily::kQwen2;
  if (architecture == kQwen3Arch) return ModelFamily::kQwen3;
  return ModelFamily::kLlama;
}

bool ModelConfig::qkv_bias() const {
  return family() == ModelFamily::kQwen2 || attention_bias;
}

bool ModelConfig::o_bias() const {
  return family() != ModelFamily::kQwen2 && attention_bias;
}

Status ValidateModelConfig(const ModelConfig& c) {
  if (c.architecture != kLlamaArch && c.architecture != kQwen2Arch &&
      c.architecture != kQwen3Arch) {
    return Bad("architecture",
               "\"" + c.architecture + "\" is not supported (supported: " +
                   std::string(kLlamaArch) + ", " + std::string(kQwen2Arch) +
                   ", " + std::string(kQwen3Arch) + ")");
  }
  for (const auto& [name, v] :
       {std::pair<const char*, double>{"vocab_size", c.vocab_size},
        {"hidden_size", c.hidden_size},
        {"intermediate_size", c.intermediate_size},
        {"num_layers", c.num_layers},
        {"num_heads", c.num_heads},
        {"num_kv_heads", c.num_kv_heads},
        {"rope_theta", c.rope_theta},
        {"rms_norm_eps", c.rms_norm_eps},
        {"max_position_embeddings", c.max_position_embeddings}}) {
    if (!(v > 0))
      return Bad(name, "must be positive, got " + std::to_string(v));
  }
  if (c.head_dim_override < 0) {
    return Bad("head_dim", "must be >= 0 (0: hidden_size / num_heads)");
  }
  if (c.head_dim_override == 0 && c.hidden_size % c.num_heads != 0) {
    return Bad("hidden_size", std::to_string(c.hidden_size) +
                                  " is not a multiple of num_heads " +
                                  std::to_string(c.num_heads) +
                                  " (set head_dim)");
  }
  if (c.head_dim() % 2 != 0 || c.head_dim() == 0) {
    return Bad("head_dim", std::to_string(c.head_dim()) +
                               " must be even and positive (rotary halves)");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return Bad("num_heads", std::to_string(c.num_heads) +
                                " must be a multiple of num_kv_heads " +
                                std::to_string(c.num_kv_heads));
  }
  if (c.mlp_bias && c.family() != ModelFamily::kLlama) {
    return Bad("mlp_bias", "is only defined for " + std::string(kLlamaArch));
  }
  if (!c.rope_scaling_type.empty()) {
    if (c.rope_scaling_type != "llama3") {
      return Bad("rope_scaling_type",
                 "\"" + c.rope_scaling_type +
                     "\" is not implemented (supported: llama3)");
    }
    if (!(c.rope_scaling_factor > 0) || !(c.rope_low_freq_factor > 0) ||
        !(c.rope_high_freq_factor > c.rope_low_freq_factor) ||
        c.rope_original_max_position_embeddings <= 0) {
      return Bad("rope_scaling_type",
                 "llama3 needs factor > 0, 0 < low_freq_factor < "
                 "high_freq_factor and original_max_position_embeddings > 0");
    }
  }
  if (c.torch_dtype != "float32" && c.torch_dtype != "bfloat16" &&
      c.torch_dtype != "float16") {
    return Bad("torch_dtype", "\"" + c.torch_dtype +
                                  "\" is not supported (float32, bfloat16, "
                                  "float16)");
  }
  return Status::OK();
}

Status ValidateTensorParallel(const ModelConfig& c, int tp) {
  if (tp < 1) return Bad("tp", "must be >= 1");
  for (const auto& [name, v] :
       {std::pair<const char*, int>{"num_heads", c.num_heads},
        {"num_kv_heads", c.num_kv_heads},
        {"intermediate_size", c.intermediate_size},
        {"vocab_size", c.vocab_size}}) {
    if (v % tp != 0) {
      return Status::InvalidArgument(
          "rollout.tensor_model_parallel_size " + std::to_string(tp) +
          " does not divide model." + name + " " + std::to_string(v));
    }
  }
  return Status::OK();
}

bool SameArchitecture(const ModelConfig& a, const ModelConfig& b) {
  auto key = [](const ModelConfig& m) {
    return std::make_tuple(
        m.architecture, m.vocab_size, m.hidden_size, m.intermediate_size,
        m.num_layers, m.num_heads, m.num_kv_heads, m.head_dim(), m.rope_theta,
        m.rms_norm_eps, m.max_position_embeddings, m.qkv_bias(), m.o_bias(),
        m.mlp_bias, m.tie_word_embeddings, m.rope_scaling_type,
        m.rope_scaling_factor, m.rope_low_freq_factor, m.rope_high_freq_factor,
        m.rope_original_max_position_embeddings);
  };
  return key(a) == key(b);
}

std::vector<TensorMeta> ModelTensors(const ModelConfig& c, ModelRole role) {
  const int64_t h = c.hidden_size;
  const int64_t d = c.head_dim();
  const int64_t q = int64_t{c.num_heads} * d;
  const int64_t kv = int64_t{c.num_kv_heads} * d;
  const int64_t ff = c.intermediate_size;
  std::vector<TensorMeta> out;
  auto add = [&out](std::string name, std::vector<int64_t> shape) {
    TensorMeta m;
    m.name = std::move(name);
    m.dtype = DType::kF32;
    m.shape = std::move(shape);
    out.push_back(std::move(m));
  };
  add("model.embed_tokens.weight", {c.vocab_size, h});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const std::string a = p + "self_attn.";
    for (const auto& [proj, rows] :
         {std::pair<const char*, int64_t>{"q", q}, {"k", kv}, {"v", kv}}) {
      add(a + proj + "_proj.weight", {rows, h});
      if (c.qkv_bias()) add(a + proj + "_proj.bias", {rows});
    }
    add(a + "o_proj.weight", {h, q});
    if (c.o_bias()) add(a + "o_proj.bias", {h});
    if (c.qk_norm()) {
      add(a + "q_norm.weight", {d});
      add(a + "k_norm.weight", {d});
    }
    add(p + "mlp.gate_proj.weight", {ff, h});
    if (c.mlp_bias) add(p + "mlp.gate_proj.bias", {ff});
    add(p + "mlp.up_proj.weight", {ff, h});
    if (c.mlp_bias) add(p + "mlp.up_proj.bias", {ff});
    add(p + "mlp.down_proj.weight", {h, ff});
    if (c.mlp_bias) add(p + "mlp.down_proj.bias", {h});
    add(p + "input_layernorm.weight", {h});
    add(p + "post_attention_layernorm.weight", {h});
  }
  add("model.norm.weight", {h});
  if (role == ModelRole::kCritic) {
    add("score.weight", {1, h});
  } else if (!c.tie_word_embeddings) {
    add("lm_head.weight", {c.vocab_size, h});
  }
  return out;
}

}  // namespace hy::trainer
