// ModelConfig: the shape of the trainer's Llama / Qwen2-style decoder, and
// the names, shapes and order of its tensors exactly as Hugging Face spells
// them (so a store exports to a directory transformers loads).
//
//   model.embed_tokens.weight                     [vocab, hidden]
//   model.layers.{i}.self_attn.q_proj.weight      [heads * head_dim, hidden]
//   model.layers.{i}.self_attn.k_proj.weight      [kv_heads * head_dim, hidden]
//   model.layers.{i}.self_attn.v_proj.weight      [kv_heads * head_dim, hidden]
//   model.layers.{i}.self_attn.o_proj.weight      [hidden, heads * head_dim]
//   model.layers.{i}.mlp.gate_proj.weight         [intermediate, hidden]
//   model.layers.{i}.mlp.up_proj.weight           [intermediate, hidden]
//   model.layers.{i}.mlp.down_proj.weight         [hidden, intermediate]
//   model.layers.{i}.input_layernorm.weight       [hidden]
//   model.layers.{i}.post_attention_layernorm.weight [hidden]
//   model.norm.weight                             [hidden]
//   lm_head.weight                                [vocab, hidden]   (actor)
//   score.weight                                  [1, hidden]       (critic)
//
// All f32. The order above is the FSDP flattening order.
//
// Thread-safety: plain values; the functions are pure.

#ifndef HY_TRAINER_MODEL_CONFIG_H_
#define HY_TRAINER_MODEL_CONFIG_H_

#include <vector>

#include "hy/common/status.h"
#include "hy/common/tensor_meta.h"

namespace hy::trainer {

struct ModelConfig {
  int vocab_size = 32;  // >= the task's 18 ids; ids beyond are never sampled.
  int hidden_size = 128;
  int intermediate_size = 256;
  int num_layers = 2;
  int num_heads = 4;
  int num_kv_heads = 2;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  int max_position_embeddings = 64;

  int head_dim() const { return hidden_size / num_heads; }
};

// Returns InvalidArgument naming the field unless every size is positive,
// vocab_size >= kVocabSize (task.h), hidden_size is a multiple of num_heads
// with an even head_dim, and num_heads is a multiple of num_kv_heads.
Status ValidateModelConfig(const ModelConfig& config);

enum class ModelRole { kActor, kCritic };

// The tensors of the actor (lm_head) or critic (score), in the order above.
// REQUIRES: ValidateModelConfig(config).ok().
std::vector<TensorMeta> ModelTensors(const ModelConfig& config,
                                     ModelRole role);

}  // namespace hy::trainer

#endif  // HY_TRAINER_MODEL_CONFIG_H_
