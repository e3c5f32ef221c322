#include "vocab_grad.h"

#include <torch/csrc/autograd/custom_function.h>

namespace hy::trainer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Both functions take the weight detached (with its .grad passed beside
// it) and a tiny anchor leaf as their differentiable input: the graph then
// holds no reference to the weight's leaf, so the weight's memory is freed
// once nothing else holds it (the lookup keeps none after its forward, the
// projection until its backward has run).
struct EmbeddingFunction : public torch::autograd::Function<EmbeddingFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& /*anchor*/,
                            const at::Tensor& w, const at::Tensor& grad,
                            const at::Tensor& tokens) {
    ctx->save_for_backward({tokens});
    ctx->saved_data["grad"] = grad;  // The leaf's, filled in place.
    at::NoGradGuard no_grad;
    return at::embedding(w, tokens);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor tokens = ctx->get_saved_variables()[0];
    at::Tensor into = ctx->saved_data["grad"].toTensor();
    into.index_add_(0, tokens.reshape({-1}),
                    grads[0].reshape({-1, into.size(1)}));
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& /*anchor*/,
                            const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& grad) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["grad"] = grad;
    at::NoGradGuard no_grad;
    return at::linear(x, w);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w = saved[1];
    at::Tensor into = ctx->saved_data["grad"].toTensor();
    const at::Tensor g = grads[0].reshape({-1, w.size(0)});
    into.addmm_(g.t(), x.reshape({-1, w.size(1)}));
    at::Tensor gx;
    if (x.requires_grad()) gx = grads[0].matmul(w);
    return {at::Tensor(), gx, at::Tensor(), at::Tensor()};
  }
};

// A fresh zero-element leaf that requires grad, so a graph node is made.
at::Tensor Anchor() { return at::empty({0}).requires_grad_(true); }

}  // namespace

bool GradGoesInPlace(const at::Tensor& w) {
  return at::GradMode::is_enabled() && w.requires_grad() && w.is_leaf() &&
         w.scalar_type() == at::kFloat && w.grad().defined() && w.dim() == 2;
}

at::Tensor EmbeddingIntoGrad(const at::Tensor& w, const at::Tensor& tokens) {
  return EmbeddingFunction::apply(Anchor(), w.detach(), w.grad(), tokens);
}

at::Tensor LinearIntoGrad(const at::Tensor& x, const at::Tensor& w) {
  return LinearFunction::apply(Anchor(), x, w.detach(), w.grad());
}

}  // namespace hy::trainer
