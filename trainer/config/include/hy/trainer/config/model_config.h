// ModelConfig: the architecture of the trainer's decoder — one of the
// Hugging Face families LlamaForCausalLM, Qwen2ForCausalLM and
// Qwen3ForCausalLM — with every config.json field that changes the math,
// and the names, shapes and order of its tensors exactly as Hugging Face
// spells them (so a store exports to a directory transformers loads).
//
//   model.embed_tokens.weight                     [vocab, hidden]
//   model.layers.{i}.self_attn.q_proj.weight      [heads * head_dim, hidden]
//   model.layers.{i}.self_attn.q_proj.bias        [heads * head_dim]  (qkv
//   bias) model.layers.{i}.self_attn.k_proj.weight      [kv_heads * head_dim,
//   hidden] model.layers.{i}.self_attn.k_proj.bias        [kv_heads * head_dim]
//   model.layers.{i}.self_attn.v_proj.weight      [kv_heads * head_dim, hidden]
//   model.layers.{i}.self_attn.v_proj.bias        [kv_heads * head_dim]
//   model.layers.{i}.self_attn.o_proj.weight      [hidden, heads * head_dim]
//   model.layers.{i}.self_attn.o_proj.bias        [hidden]            (o bias)
//   model.layers.{i}.self_attn.q_norm.weight      [head_dim]          (Qwen3)
//   model.layers.{i}.self_attn.k_norm.weight      [head_dim]          (Qwen3)
//   model.layers.{i}.mlp.{gate,up}_proj.weight    [intermediate, hidden]
//   model.layers.{i}.mlp.{gate,up}_proj.bias      [intermediate]   (mlp_bias)
//   model.layers.{i}.mlp.down_proj.weight         [hidden, intermediate]
//   model.layers.{i}.mlp.down_proj.bias           [hidden]         (mlp_bias)
//   model.layers.{i}.input_layernorm.weight       [hidden]
//   model.layers.{i}.post_attention_layernorm.weight [hidden]
//   model.norm.weight                             [hidden]
//   lm_head.weight                                [vocab, hidden]   (actor,
//                                                 unless tied to embed_tokens)
//   score.weight                                  [1, hidden]       (critic)
//
// Which biases exist follows transformers: Qwen2 always has q/k/v biases
// and no o bias; Llama and Qwen3 have q/k/v/o biases when attention_bias;
// Llama has MLP biases when mlp_bias. The master copy is f32 whatever
// torch_dtype the files hold. The order above is the FSDP flattening order.
//
// Thread-safety: plain values; the functions are pure.

#ifndef HY_TRAINER_CONFIG_MODEL_CONFIG_H_
#define HY_TRAINER_CONFIG_MODEL_CONFIG_H_

#include <string>
#include <string_view>
#include <vector>

#include "hy/common/status.h"
#include "hy/common/tensor_meta.h"

namespace hy::trainer {

enum class ModelFamily { kLlama, kQwen2, kQwen3 };

// The architectures hy trains ("LlamaForCausalLM", ...).
inline constexpr std::string_view kLlamaArch = "LlamaForCausalLM";
inline constexpr std::string_view kQwen2Arch = "Qwen2ForCausalLM";
inline constexpr std::string_view kQwen3Arch = "Qwen3ForCausalLM";

struct ModelConfig {
  // A Hugging Face model directory (config.json + safetensors) to start
  // from; empty: random init of the shape below. When set, the worker
  // replaces every field below by the directory's config.json.
  std::string path;
  std::string architecture = std::string(kLlamaArch);
  int vocab_size = 32;
  int hidden_size = 128;
  int intermediate_size = 256;
  int num_layers = 2;
  int num_heads = 4;
  int num_kv_heads = 2;
  // config.json's head_dim; 0: hidden_size / num_heads (its default).
  int head_dim_override = 0;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  int max_position_embeddings = 64;
  bool attention_bias = false;  // Llama / Qwen3: q/k/v/o biases.
  bool mlp_bias = false;        // Llama only.
  bool tie_word_embeddings = false;
  // rope_scaling: "" (none) or "llama3" with its four parameters.
  std::string rope_scaling_type;
  double rope_scaling_factor = 0;
  double rope_low_freq_factor = 0;
  double rope_high_freq_factor = 0;
  int rope_original_max_position_embeddings = 0;
  // The dtype of the weights in the files ("bfloat16", "float32",
  // "float16"); what export writes back.
  std::string torch_dtype = "float32";

  int head_dim() const {
    return head_dim_override > 0 ? head_dim_override : hidden_size / num_heads;
  }
  // REQUIRES: architecture is one of the k*Arch (ValidateModelConfig).
  ModelFamily family() const;
  bool qkv_bias() const;
  bool o_bias() const;
  bool qk_norm() const { return family() == ModelFamily::kQwen3; }
};

// Returns InvalidArgument naming the field unless the architecture is one
// hy implements, every size is positive, head_dim is even, num_heads is a
// multiple of num_kv_heads, mlp_bias is only set for Llama, and
// rope_scaling is none or a complete "llama3".
Status ValidateModelConfig(const ModelConfig& config);

// Returns InvalidArgument naming the field unless tensor parallelism of
// degree `tp` can split the model: tp divides num_heads, num_kv_heads,
// intermediate_size and vocab_size.
Status ValidateTensorParallel(const ModelConfig& config, int tp);

// True when a and b compute the same function with the same tensors (every
// field but path and torch_dtype agrees).
bool SameArchitecture(const ModelConfig& a, const ModelConfig& b);

enum class ModelRole { kActor, kCritic };

// The tensors of the actor (lm_head, absent when tied) or critic (score),
// in the order above, all f32.
// REQUIRES: ValidateModelConfig(config).ok().
std::vector<TensorMeta> ModelTensors(const ModelConfig& config, ModelRole role);

}  // namespace hy::trainer

#endif  // HY_TRAINER_CONFIG_MODEL_CONFIG_H_
