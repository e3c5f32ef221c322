#include "hy/trainer/model/model.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstring>

#include "hy/trainer/model/comm.h"
#include "hy/trainer/model/vocab_matrix.h"
#include "layer_checkpoint.h"

namespace hy::trainer {
namespace {

at::Tensor F32(const at::Tensor& w) {
  return w.scalar_type() == at::kFloat ? w : w.to(at::kFloat);
}

at::Tensor Linear(const at::Tensor& x, const at::Tensor& w,
                  const at::Tensor& b = at::Tensor()) {
  return b.defined() ? at::linear(x, F32(w), F32(b)) : at::linear(x, F32(w));
}

// A bias added after the TP all-reduce of a row-parallel projection.
at::Tensor AddBias(const at::Tensor& x, const at::Tensor& b) {
  return b.defined() ? x + F32(b) : x;
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& w, double eps) {
  at::Tensor var = x.pow(2).mean(-1, /*keepdim=*/true);
  return F32(w) * (x * at::rsqrt(var + eps));
}

at::Tensor RotateHalf(const at::Tensor& x) {
  const int64_t d = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, d, d), x.narrow(-1, 0, d)}, -1);
}

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Looks weights up by name, remembering the first one missing.
struct Binder {
  const std::function<at::Tensor(const std::string&)>& lookup;
  Status missing;

  at::Tensor Get(const std::string& name) {
    at::Tensor t = lookup(name);
    if (!t.defined() && missing.ok()) {
      missing = Status::NotFound("model weight " + name + " is missing");
    }
    return t;
  }
  at::Tensor GetIf(bool present, const std::string& name) {
    return present ? Get(name) : at::Tensor();
  }
};

LayerWeights BindLayerWith(const ModelConfig& config, int i, Binder* b) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  const std::string a = p + "self_attn.";
  LayerWeights l;
  l.q = b->Get(a + "q_proj.weight");
  l.k = b->Get(a + "k_proj.weight");
  l.v = b->Get(a + "v_proj.weight");
  l.o = b->Get(a + "o_proj.weight");
  l.q_bias = b->GetIf(config.qkv_bias(), a + "q_proj.bias");
  l.k_bias = b->GetIf(config.qkv_bias(), a + "k_proj.bias");
  l.v_bias = b->GetIf(config.qkv_bias(), a + "v_proj.bias");
  l.o_bias = b->GetIf(config.o_bias(), a + "o_proj.bias");
  l.q_norm = b->GetIf(config.qk_norm(), a + "q_norm.weight");
  l.k_norm = b->GetIf(config.qk_norm(), a + "k_norm.weight");
  l.gate = b->Get(p + "mlp.gate_proj.weight");
  l.up = b->Get(p + "mlp.up_proj.weight");
  l.down = b->Get(p + "mlp.down_proj.weight");
  l.gate_bias = b->GetIf(config.mlp_bias, p + "mlp.gate_proj.bias");
  l.up_bias = b->GetIf(config.mlp_bias, p + "mlp.up_proj.bias");
  l.down_bias = b->GetIf(config.mlp_bias, p + "mlp.down_proj.bias");
  l.input_norm = b->Get(p + "input_layernorm.weight");
  l.post_norm = b->Get(p + "post_attention_layernorm.weight");
  return l;
}

}  // namespace

Result<LayerWeights> BindLayer(
    const ModelConfig& config, int layer,
    const std::function<at::Tensor(const std::string&)>& lookup) {
  Binder b{lookup, Status::OK()};
  LayerWeights l = BindLayerWith(config, layer, &b);
  if (!b.missing.ok()) return b.missing;
  return l;
}

Result<Weights> BindWeights(
    const ModelConfig& config, ModelRole role,
    const std::function<at::Tensor(const std::string&)>& lookup,
    bool with_layers) {
  Binder b{lookup, Status::OK()};
  auto get = [&](const std::string& name) { return b.Get(name); };
  Weights w;
  w.embed = get("model.embed_tokens.weight");
  for (int i = 0; with_layers && i < config.num_layers; ++i) {
    w.layers.push_back(BindLayerWith(config, i, &b));
  }
  w.norm = get("model.norm.weight");
  if (role == ModelRole::kCritic) {
    w.head = get("score.weight");
  } else {
    w.head = config.tie_word_embeddings ? w.embed : get("lm_head.weight");
  }
  if (!b.missing.ok()) return b.missing;
  return w;
}

at::Tensor RopeInvFreq(const ModelConfig& config) {
  const int64_t d = config.head_dim();
  at::Tensor inv_freq =
      1.0 /
      at::pow(config.rope_theta, at::arange(0, d, 2, at::kLong).to(at::kFloat) /
                                     static_cast<double>(d));
  if (config.rope_scaling_type != "llama3") return inv_freq;
  // transformers' _compute_llama3_parameters.
  const double factor = config.rope_scaling_factor;
  const double low = config.rope_low_freq_factor;
  const double high = config.rope_high_freq_factor;
  const double old_len = config.rope_original_max_position_embeddings;
  const double low_wavelen = old_len / low;
  const double high_wavelen = old_len / high;
  at::Tensor wavelen = 2 * M_PI / inv_freq;
  at::Tensor scaled =
      at::where(wavelen > low_wavelen, inv_freq / factor, inv_freq);
  at::Tensor smooth = (old_len / wavelen - low) / (high - low);
  at::Tensor smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
  at::Tensor medium = (wavelen < high_wavelen)
                          .logical_not()
                          .logical_and((wavelen > low_wavelen).logical_not());
  return at::where(medium, smoothed, scaled);
}

Result<at::Tensor> DecoderLayer(const ModelConfig& config,
                                const LayerWeights& l, at::Tensor x,
                                const LayerContext& c, const TpContext& tp,
                                KvCache* cache, size_t layer) {
  at::Tensor h = RmsNorm(x, l.input_norm, config.rms_norm_eps);
  at::Tensor q = Linear(h, l.q, l.q_bias).view({c.batch, c.len, c.heads, c.d});
  at::Tensor k =
      Linear(h, l.k, l.k_bias).view({c.batch, c.len, c.kv_heads, c.d});
  at::Tensor v = Linear(h, l.v, l.v_bias)
                     .view({c.batch, c.len, c.kv_heads, c.d})
                     .transpose(1, 2);
  if (l.q_norm.defined()) {  // Qwen3: RMSNorm over each head's features.
    q = RmsNorm(q, l.q_norm, config.rms_norm_eps);
    k = RmsNorm(k, l.k_norm, config.rms_norm_eps);
  }
  q = q.transpose(1, 2);
  k = k.transpose(1, 2);
  q = q * c.cos + RotateHalf(q) * c.sin;
  k = k * c.cos + RotateHalf(k) * c.sin;
  if (cache != nullptr) {
    cache->k[layer].narrow(2, c.past, c.len).copy_(k);
    cache->v[layer].narrow(2, c.past, c.len).copy_(v);
    k = cache->k[layer].narrow(2, 0, c.past + c.len);
    v = cache->v[layer].narrow(2, 0, c.past + c.len);
  }
  if (c.rep > 1) {
    k = k.repeat_interleave(c.rep, 1);
    v = v.repeat_interleave(c.rep, 1);
  }
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * c.scale + c.bias;
  at::Tensor attn = at::matmul(at::softmax(scores, -1), v)
                        .transpose(1, 2)
                        .reshape({c.batch, c.len, c.heads * c.d});
  at::Tensor o = Linear(attn, l.o).contiguous();
  HY_RETURN_IF_ERROR(tp.tp == 1 ? Status::OK() : tp.comm->TpAllReduce(&o));
  x = x + AddBias(o, l.o_bias);
  h = RmsNorm(x, l.post_norm, config.rms_norm_eps);
  at::Tensor m = Linear(at::silu(Linear(h, l.gate, l.gate_bias)) *
                            Linear(h, l.up, l.up_bias),
                        l.down)
                     .contiguous();
  HY_RETURN_IF_ERROR(tp.tp == 1 ? Status::OK() : tp.comm->TpAllReduce(&m));
  x = x + AddBias(m, l.down_bias);
  return x;
}

namespace {

// The token embeddings [B, T, hidden]; vocab-parallel under TP: each rank
// looks up its rows (zeros elsewhere) and the group sums them.
Result<at::Tensor> Embed(const Weights& w, const at::Tensor& tokens,
                         const TpContext& tp) {
  at::Tensor x;
  if (tp.tp == 1) {
    if (w.embed_rows != nullptr) {
      HY_ASSIGN_OR_RETURN(x, StreamedEmbedding(w.embed_rows, tokens));
    } else {
      x = at::embedding(F32(w.embed), tokens);
    }
  } else {
    const int64_t rows = w.embed.size(0);
    at::Tensor local = tokens - tp.rank * rows;
    at::Tensor in = (local >= 0).logical_and(local < rows);
    x = at::embedding(F32(w.embed), local.clamp(0, rows - 1)) *
        in.unsqueeze(-1).to(at::kFloat);
    x = x.contiguous();
    HY_RETURN_IF_ERROR(tp.comm->TpAllReduce(&x));
  }
  return x;
}

// The layers' shapes: tokens [B, T] after the cache's `past` positions, and
// this rank's heads under TP.
LayerContext LayerShapes(const ModelConfig& config, const at::Tensor& tokens,
                         const TpContext& tp, const KvCache* cache) {
  LayerContext c;
  c.batch = tokens.size(0);
  c.len = tokens.size(1);
  c.d = config.head_dim();
  c.heads = config.num_heads / tp.tp;
  c.kv_heads = config.num_kv_heads / tp.tp;
  c.rep = c.heads / c.kv_heads;
  c.past = cache == nullptr ? 0 : cache->length;
  c.scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  return c;
}

// Rotary tables [B, 1, T, d] of positions [B, T] into c->cos and c->sin.
void SetRotary(const ModelConfig& config, const at::Tensor& positions,
               const at::Device& dev, LayerContext* c) {
  at::Tensor inv_freq = RopeInvFreq(config).to(dev);
  at::Tensor freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  c->cos = emb.cos().unsqueeze(1);
  c->sin = emb.sin().unsqueeze(1);
}

// Additive mask [B, 1, T, keys]: causal, valid keys, and always self.
at::Tensor AttentionMask(const at::Tensor& key_valid, const LayerContext& c,
                         const at::Device& dev) {
  const auto on = [&dev](at::ScalarType t) {
    return at::TensorOptions().dtype(t).device(dev);
  };
  const int64_t keys = c.past + c.len;
  at::Tensor q_index = at::arange(c.past, keys, on(at::kLong)).unsqueeze(1);
  at::Tensor k_index = at::arange(0, keys, on(at::kLong)).unsqueeze(0);
  at::Tensor allowed = (k_index <= q_index)
                           .unsqueeze(0)
                           .logical_and(key_valid.to(at::kBool).unsqueeze(1));
  allowed = allowed.logical_or((k_index == q_index).unsqueeze(0));
  return at::zeros({c.batch, 1, c.len, keys}, on(at::kFloat))
      .masked_fill(allowed.logical_not().unsqueeze(1), -1e9);
}

// The decoder layers on x in order: through the runner when there is one,
// else recomputed in the backward pass when asked (training without a cache
// or TP), else one DecoderLayer each.
Result<at::Tensor> RunLayers(const ModelConfig& config, const Weights& w,
                             at::Tensor x, const LayerContext& c,
                             const TpContext& tp, KvCache* cache,
                             bool recompute, const LayerRunner* runner) {
  const bool checkpoint =
      recompute && cache == nullptr && tp.tp == 1 && at::GradMode::is_enabled();
  const size_t layers = runner != nullptr
                            ? static_cast<size_t>(config.num_layers)
                            : w.layers.size();
  for (size_t i = 0; i < layers; ++i) {
    if (runner != nullptr) {
      HY_ASSIGN_OR_RETURN(x, (*runner)(i, x, c));
    } else if (checkpoint) {
      x = CheckpointedLayer(config, w.layers[i], x, c);
    } else {
      HY_ASSIGN_OR_RETURN(
          x, DecoderLayer(config, w.layers[i], x, c, tp, cache, i));
    }
  }
  return x;
}

}  // namespace

Result<at::Tensor> Trunk(const ModelConfig& config, const Weights& w,
                         const at::Tensor& tokens_in,
                         const at::Tensor& positions_in,
                         const at::Tensor& key_valid_in, const TpContext& tp,
                         KvCache* cache, bool recompute,
                         const LayerRunner* runner) {
  // The weights' device decides (the final norm is always bound); inputs
  // built on the host come over (on the CPU .to() is the tensor itself).
  const at::Device dev = w.norm.device();
  const at::Tensor tokens = tokens_in.to(dev);
  const at::Tensor positions = positions_in.to(dev);
  const at::Tensor key_valid = key_valid_in.to(dev);
  LayerContext c = LayerShapes(config, tokens, tp, cache);
  HY_ASSIGN_OR_RETURN(at::Tensor x, Embed(w, tokens, tp));
  SetRotary(config, positions, dev, &c);
  c.bias = AttentionMask(key_valid, c, dev);
  HY_ASSIGN_OR_RETURN(
      x, RunLayers(config, w, std::move(x), c, tp, cache, recompute, runner));
  if (cache != nullptr) cache->length = c.past + c.len;
  return RmsNorm(x, w.norm, config.rms_norm_eps);
}

Result<at::Tensor> LmHead(const Weights& w, const at::Tensor& hidden,
                          const TpContext& tp) {
  if (tp.tp == 1 && w.head_rows != nullptr) {
    return StreamedLinear(w.head_rows, hidden);
  }
  at::Tensor logits = Linear(hidden, w.head);
  if (tp.tp == 1) return logits;
  return tp.comm->TpAllGather(logits, -1);
}

at::Tensor ValueHead(const Weights& w, const at::Tensor& hidden) {
  return Linear(hidden, w.head).squeeze(-1);
}

KvCache MakeKvCache(const ModelConfig& config, int tp, int64_t batch,
                    int64_t capacity, const at::Device& device) {
  KvCache cache;
  for (int i = 0; i < config.num_layers; ++i) {
    cache.k.push_back(at::zeros(
        {batch, config.num_kv_heads / tp, capacity, config.head_dim()},
        at::TensorOptions().dtype(at::kFloat).device(device)));
    cache.v.push_back(at::zeros_like(cache.k.back()));
  }
  return cache;
}

at::Tensor InitTensor(uint64_t seed, const std::string& name,
                      const std::vector<int64_t>& shape) {
  at::Tensor t = at::empty(shape, at::kFloat);
  const bool norm = name.find("norm") != std::string::npos;
  if (norm) return t.fill_(1.0);
  const bool bias =
      name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
  if (bias || name.rfind("score.", 0) == 0) return t.zero_();
  uint64_t state = seed * 0x2545F4914F6CDD1Dull;
  for (char c : name)
    state = (state ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  float* p = t.data_ptr<float>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; i += 2) {
    // Box-Muller on two 53-bit uniforms in (0, 1].
    const double u1 = (static_cast<double>(SplitMix(&state) >> 11) + 1.0) *
                      (1.0 / 9007199254740992.0);
    const double u2 = static_cast<double>(SplitMix(&state) >> 11) *
                      (1.0 / 9007199254740992.0);
    const double r = std::sqrt(-2.0 * std::log(u1)) * 0.02;
    p[i] = static_cast<float>(r * std::cos(2 * M_PI * u2));
    if (i + 1 < n) p[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
  }
  return t;
}

}  // namespace hy::trainer
