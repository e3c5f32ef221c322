#include "layer_checkpoint.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <array>
#include <vector>

namespace hy::trainer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The weight fields of a layer, in a fixed order.
std::array<at::Tensor LayerWeights::*, 18> Fields() {
  return {&LayerWeights::q,         &LayerWeights::k,
          &LayerWeights::v,         &LayerWeights::o,
          &LayerWeights::gate,      &LayerWeights::up,
          &LayerWeights::down,      &LayerWeights::input_norm,
          &LayerWeights::post_norm, &LayerWeights::q_bias,
          &LayerWeights::k_bias,    &LayerWeights::v_bias,
          &LayerWeights::o_bias,    &LayerWeights::gate_bias,
          &LayerWeights::up_bias,   &LayerWeights::down_bias,
          &LayerWeights::q_norm,    &LayerWeights::k_norm};
}

// The layer's defined weights (autograd inputs) and which fields they fill.
struct Packed {
  std::vector<at::Tensor> weights;
  int64_t present = 0;  // Bit f: field f is defined.
};

Packed Pack(const LayerWeights& l) {
  Packed p;
  const auto fields = Fields();
  for (size_t f = 0; f < fields.size(); ++f) {
    if ((l.*fields[f]).defined()) {
      p.weights.push_back(l.*fields[f]);
      p.present |= int64_t{1} << f;
    }
  }
  return p;
}

LayerWeights Unpack(const std::vector<at::Tensor>& weights, int64_t present) {
  LayerWeights l;
  const auto fields = Fields();
  size_t next = 0;
  for (size_t f = 0; f < fields.size(); ++f) {
    if (present & (int64_t{1} << f)) l.*fields[f] = weights[next++];
  }
  return l;
}

at::Tensor RunLayer(const ModelConfig& config, const LayerWeights& l,
                    const at::Tensor& x, const LayerContext& c) {
  // No TP and no cache: nothing can fail.
  return DecoderLayer(config, l, x, c, TpContext{}, nullptr, 0).value();
}

struct LayerFunction : public torch::autograd::Function<LayerFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x,
                            at::TensorList weights, int64_t present,
                            const ModelConfig* config, LayerContext c) {
    std::vector<at::Tensor> saved{x};
    saved.insert(saved.end(), weights.begin(), weights.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["present"] = present;
    SaveLayerContext(ctx, c);
    ctx->saved_data["config"] = reinterpret_cast<int64_t>(config);
    at::NoGradGuard no_grad;
    return RunLayer(*config, Unpack(weights.vec(), present), x, c);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    const auto* config =
        reinterpret_cast<const ModelConfig*>(ctx->saved_data["config"].toInt());
    const LayerContext c = LoadLayerContext(ctx);
    // Leaves standing for the inputs: the layer runs again on them.
    variable_list inputs;
    for (const at::Tensor& t : saved) {
      inputs.push_back(t.detach().requires_grad_(t.requires_grad()));
    }
    std::vector<at::Tensor> weights(inputs.begin() + 1, inputs.end());
    at::Tensor y;
    {
      at::AutoGradMode grad_on(true);
      y = RunLayer(*config, Unpack(weights, ctx->saved_data["present"].toInt()),
                   inputs[0], c);
    }
    variable_list wanted, out(1 + weights.size());
    std::vector<size_t> where;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].requires_grad()) {
        wanted.push_back(inputs[i]);
        where.push_back(i);
      }
    }
    if (!wanted.empty()) {
      variable_list g = torch::autograd::grad({y}, wanted, {grads[0]},
                                              /*retain_graph=*/false,
                                              /*create_graph=*/false,
                                              /*allow_unused=*/true);
      for (size_t k = 0; k < where.size(); ++k) out[where[k]] = g[k];
    }
    // x, then one per weight; none for present, config and the context.
    out.push_back(at::Tensor());
    out.push_back(at::Tensor());
    out.push_back(at::Tensor());
    return out;
  }
};

}  // namespace

void SaveLayerContext(AutogradContext* ctx, const LayerContext& c) {
  ctx->saved_data["cos"] = c.cos;
  ctx->saved_data["sin"] = c.sin;
  ctx->saved_data["bias"] = c.bias;
  ctx->saved_data["scale"] = c.scale;
  ctx->saved_data["shape"] =
      std::vector<int64_t>{c.batch, c.len, c.heads, c.kv_heads, c.rep, c.d};
  ctx->saved_data["past"] = c.past;
}

LayerContext LoadLayerContext(AutogradContext* ctx) {
  LayerContext c;
  c.cos = ctx->saved_data["cos"].toTensor();
  c.sin = ctx->saved_data["sin"].toTensor();
  c.bias = ctx->saved_data["bias"].toTensor();
  c.scale = ctx->saved_data["scale"].toDouble();
  const std::vector<int64_t> shape = ctx->saved_data["shape"].toIntVector();
  c.batch = shape[0];
  c.len = shape[1];
  c.heads = shape[2];
  c.kv_heads = shape[3];
  c.rep = shape[4];
  c.d = shape[5];
  c.past = ctx->saved_data["past"].toInt();
  return c;
}

at::Tensor CheckpointedLayer(const ModelConfig& config, const LayerWeights& l,
                             const at::Tensor& x, const LayerContext& c) {
  Packed p = Pack(l);
  return LayerFunction::apply(x, at::TensorList(p.weights), p.present, &config,
                              c);
}

}  // namespace hy::trainer
