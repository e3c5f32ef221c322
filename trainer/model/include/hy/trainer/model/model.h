// The trainer's decoder as functions over weight tensors (no nn::Module):
// the Llama / Qwen2 / Qwen3 decoder as transformers computes it (RMSNorm,
// rotary embeddings with the rotate-half convention and optional llama3
// frequency scaling, grouped-query attention with optional q/k/v/o biases
// and Qwen3's per-head q/k RMSNorm, SwiGLU MLP, optionally tied lm_head),
// evaluated either whole or tensor-parallel.
//
// Weights are bound by Hugging Face name to tensors the caller owns: views
// into an FSDP-gathered flat buffer (training, f32, autograd flows back into
// the buffer) or a rank's TP shards (rollout, bf16; upcast to f32 at each
// use, activations stay f32). Under TP (tp > 1) q/k/v/gate/up hold this
// rank's rows, o/down its columns, embed_tokens and lm_head its vocabulary
// rows; the partial sums are all-reduced and the logits all-gathered
// through Comm. A TP forward equals the whole forward up to rounding.
//
// Part of hy_trainer_model (LibTorch; ppo/ uses it). Thread-safety: pure
// functions of their inputs.

#ifndef HY_TRAINER_MODEL_MODEL_H_
#define HY_TRAINER_MODEL_MODEL_H_

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/trainer/config/model_config.h"

namespace hy::trainer {

class Comm;
class VocabMatrix;

// Undefined tensors are absent from the architecture (biases, q/k norms).
struct LayerWeights {
  at::Tensor q, k, v, o, gate, up, down, input_norm, post_norm;
  at::Tensor q_bias, k_bias, v_bias, o_bias, gate_bias, up_bias, down_bias;
  at::Tensor q_norm, k_norm;
};

struct Weights {
  at::Tensor embed;
  std::vector<LayerWeights> layers;
  at::Tensor norm;
  at::Tensor head;  // lm_head (actor; embed when tied) or score (critic).
  // When set (an FSDP pass's, see vocab_matrix.h), the embedding and the
  // actor's head go through these instead of embed and head (tp == 1).
  VocabMatrix* embed_rows = nullptr;
  VocabMatrix* head_rows = nullptr;
};

// Binds weights by name (the tensors ModelTensors lists; without
// `with_layers` only the embedding, final norm and head, layers staying
// empty). Returns NotFound naming a tensor `lookup` does not know (lookup
// returns an undefined tensor for it).
Result<Weights> BindWeights(
    const ModelConfig& config, ModelRole role,
    const std::function<at::Tensor(const std::string&)>& lookup,
    bool with_layers = true);

// Decoder layer `layer`'s weights by name; errors as BindWeights.
Result<LayerWeights> BindLayer(
    const ModelConfig& config, int layer,
    const std::function<at::Tensor(const std::string&)>& lookup);

// Tensor parallelism for a forward: tp == 1 (comm may be null) is the whole
// model.
struct TpContext {
  int tp = 1;
  int rank = 0;
  Comm* comm = nullptr;
};

// Keys and values of past positions, per layer [batch, kv_heads/tp,
// capacity, head_dim]; `length` positions are filled.
struct KvCache {
  std::vector<at::Tensor> k, v;
  int64_t length = 0;
};

// What every decoder layer of one forward shares: rotary tables [B, 1, T,
// d], the additive attention mask [B, 1, T, keys], and the shapes.
struct LayerContext {
  at::Tensor cos, sin, bias;
  double scale = 1.0;
  int64_t batch = 0, len = 0, heads = 0, kv_heads = 0, rep = 1, d = 0;
  int64_t past = 0;  // Positions already in the cache.
};

// One decoder layer: x [B, T, hidden] in, out. Under TP its partial sums are
// all-reduced (the comm's errors are returned); with a cache, its keys and
// values land in layer `layer` of it.
Result<at::Tensor> DecoderLayer(const ModelConfig& config,
                                const LayerWeights& l, at::Tensor x,
                                const LayerContext& c, const TpContext& tp,
                                KvCache* cache, size_t layer);

// Runs decoder layer `layer` on x in the caller's way (FSDP by layer:
// gathers its weights first); returns the layer's output or its error.
using LayerRunner = std::function<Result<at::Tensor>(
    size_t layer, const at::Tensor& x, const LayerContext& c)>;

// The trunk: tokens [B, T] (int64), positions [B, T] (int64, rotary),
// key_valid [B, cache length + T] (bool: which keys may be attended; a
// query also attends only to keys at or before its own index). With a
// cache, the new keys are appended to it (capacity must suffice). Returns
// the final-norm hidden states [B, T, hidden] (f32), or a comm error.
// With `recompute` (and gradients on, no TP, no cache), each decoder layer
// keeps only its input for backward and runs again there (activation
// checkpointing): the same gradients, a layer's activations at a time.
// With a `runner`, it runs every decoder layer (w.layers is not used).
// Runs on the weights' device (w.norm's): inputs built elsewhere are
// copied there, and the hidden states are returned there.
Result<at::Tensor> Trunk(const ModelConfig& config, const Weights& w,
                         const at::Tensor& tokens, const at::Tensor& positions,
                         const at::Tensor& key_valid, const TpContext& tp,
                         KvCache* cache, bool recompute = false,
                         const LayerRunner* runner = nullptr);

// Logits [B, T, vocab] from hidden states (all-gathered under TP).
Result<at::Tensor> LmHead(const Weights& w, const at::Tensor& hidden,
                          const TpContext& tp);

// Values [B, T] from hidden states (critic: score head).
at::Tensor ValueHead(const Weights& w, const at::Tensor& hidden);

// An empty cache for `batch` sequences of up to `capacity` positions, on
// `device` (the weights').
KvCache MakeKvCache(const ModelConfig& config, int tp, int64_t batch,
                    int64_t capacity,
                    const at::Device& device = at::Device(at::kCPU));

// The rotary inverse frequencies [head_dim / 2] (f32), llama3-scaled when
// the config says so, as transformers' rope init functions compute them.
at::Tensor RopeInvFreq(const ModelConfig& config);

// Initial weights, a pure function of (seed, name): normal(0, 0.02) for
// matrices, ones for norms, zeros for biases and the critic's score head.
at::Tensor InitTensor(uint64_t seed, const std::string& name,
                      const std::vector<int64_t>& shape);

}  // namespace hy::trainer

#endif  // HY_TRAINER_MODEL_MODEL_H_
