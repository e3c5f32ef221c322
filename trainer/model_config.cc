#include "hy/trainer/model_config.h"

#include <string>

#include "hy/trainer/task.h"

namespace hy::trainer {

Status ValidateModelConfig(const ModelConfig& c) {
  auto positive = [](const char* name, double v) -> Status {
    if (!(v > 0)) {
      return Status::InvalidArgument(std::string("model.") + name +
                                     " must be positive, got " +
                                     std::to_string(v));
    }
    return Status::OK();
  };
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
    HY_RETURN_IF_ERROR(positive(name, v));
  }
  if (c.vocab_size < kVocabSize) {
    return Status::InvalidArgument(
        "model.vocab_size " + std::to_string(c.vocab_size) +
        " is smaller than the task's " + std::to_string(kVocabSize) + " ids");
  }
  if (c.hidden_size % c.num_heads != 0 || c.head_dim() % 2 != 0) {
    return Status::InvalidArgument(
        "model.hidden_size " + std::to_string(c.hidden_size) +
        " must be num_heads (" + std::to_string(c.num_heads) +
        ") times an even head_dim");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return Status::InvalidArgument("model.num_heads " +
                                   std::to_string(c.num_heads) +
                                   " must be a multiple of num_kv_heads " +
                                   std::to_string(c.num_kv_heads));
  }
  return Status::OK();
}

std::vector<TensorMeta> ModelTensors(const ModelConfig& c, ModelRole role) {
  const int64_t h = c.hidden_size;
  const int64_t q = int64_t{c.num_heads} * c.head_dim();
  const int64_t kv = int64_t{c.num_kv_heads} * c.head_dim();
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
    add(p + "self_attn.q_proj.weight", {q, h});
    add(p + "self_attn.k_proj.weight", {kv, h});
    add(p + "self_attn.v_proj.weight", {kv, h});
    add(p + "self_attn.o_proj.weight", {h, q});
    add(p + "mlp.gate_proj.weight", {ff, h});
    add(p + "mlp.up_proj.weight", {ff, h});
    add(p + "mlp.down_proj.weight", {h, ff});
    add(p + "input_layernorm.weight", {h});
    add(p + "post_attention_layernorm.weight", {h});
  }
  add("model.norm.weight", {h});
  if (role == ModelRole::kActor) {
    add("lm_head.weight", {c.vocab_size, h});
  } else {
    add("score.weight", {1, h});
  }
  return out;
}

}  // namespace hy::trainer
