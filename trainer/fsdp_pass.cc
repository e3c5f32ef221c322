#include "fsdp_pass.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <vector>

#include "comm.h"
#include "layer_checkpoint.h"

namespace hy::trainer {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// Decoder layer `layer` on x with the weights in a gathered unit buffer.
Result<at::Tensor> LayerOn(const FsdpModel& model, const FsdpUnits& units,
                           const at::Tensor& buffer, int layer,
                           const at::Tensor& x, const LayerContext& c) {
  const int unit = FsdpUnits::LayerUnit(layer);
  HY_ASSIGN_OR_RETURN(
      LayerWeights l,
      BindLayer(model.config(), layer, [&](const std::string& name) {
        return units.View(buffer, unit, name);
      }));
  return DecoderLayer(model.config(), l, x, c, TpContext{}, nullptr,
                      static_cast<size_t>(layer));
}

}  // namespace

// One decoder layer under FSDP by layer: forward with the weights the
// runner gathered (kept by nobody after), saving only x; backward gathers
// them again, runs the layer again with the graph on, backpropagates and
// reduces the layer's gradient into the pass's piece.
struct ShardedLayerFunction
    : public torch::autograd::Function<ShardedLayerFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& buffer, int64_t pass,
                            int64_t layer, LayerContext c) {
    ctx->save_for_backward({x});
    SaveLayerContext(ctx, c);
    ctx->saved_data["pass"] = pass;
    ctx->saved_data["layer"] = layer;
    auto* p = reinterpret_cast<FsdpPass*>(pass);
    Result<at::Tensor> y =
        LayerOn(*p->model_, *p->units_, buffer, static_cast<int>(layer), x, c);
    if (!y.ok()) throw std::runtime_error(y.status().ToString());
    return *y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* p = reinterpret_cast<FsdpPass*>(ctx->saved_data["pass"].toInt());
    const int layer = static_cast<int>(ctx->saved_data["layer"].toInt());
    const int unit = FsdpUnits::LayerUnit(layer);
    const at::Tensor saved = ctx->get_saved_variables()[0];
    auto fail = [&](const Status& s) {
      p->backward_status_ = s;
      throw std::runtime_error(s.ToString());
    };
    Result<at::Tensor> gathered = p->TakeUnit(unit);
    if (!gathered.ok()) fail(gathered.status());
    at::Tensor buffer = std::move(gathered).value();
    // Backward runs the layers in reverse: the one below is next.
    if (layer > 0) p->StartPrefetch(FsdpUnits::LayerUnit(layer - 1));
    FsdpModel::TrackGradient(&buffer);
    at::Tensor x = saved.detach().requires_grad_(saved.requires_grad());
    {
      at::AutoGradMode grad_on(true);
      Result<at::Tensor> y = LayerOn(*p->model_, *p->units_, buffer, layer, x,
                                     LoadLayerContext(ctx));
      if (!y.ok()) fail(y.status());
      torch::autograd::backward({*y}, {grads[0]});
    }
    Status s = p->FinishPrefetch();  // Before this rank's next collective.
    if (!s.ok()) fail(s);
    s = p->units_->ReduceGradient(p->comm_, unit, buffer.grad(), p->Piece());
    if (!s.ok()) fail(s);
    // x, then none for the buffer, the pass, the layer and the context.
    return {x.requires_grad() ? x.grad() : at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

Result<std::unique_ptr<FsdpPass>> FsdpPass::Begin(FsdpModel* model,
                                                  const FsdpUnits* units,
                                                  Comm* comm, bool train) {
  std::unique_ptr<FsdpPass> pass(new FsdpPass());
  pass->model_ = model;
  pass->units_ = units;
  pass->comm_ = comm;
  pass->train_ = train;
  if (units == nullptr) {
    HY_RETURN_IF_ERROR(model->Gather(comm, &pass->full_));
  } else {
    HY_RETURN_IF_ERROR(units->Gather(comm, 0, &pass->full_));
    FsdpPass* raw = pass.get();
    pass->runner_ = [raw](size_t layer, const at::Tensor& x,
                          const LayerContext& c) {
      return raw->RunLayer(layer, x, c);
    };
  }
  if (train) FsdpModel::TrackGradient(&pass->full_);
  return pass;
}

FsdpPass::~FsdpPass() { FinishPrefetch().IgnoreError(); }

void FsdpPass::StartPrefetch(int unit) {
  prefetch_unit_ = unit;
  prefetch_status_ = Status::OK();
  prefetched_ = at::Tensor();
  prefetch_ = std::async(std::launch::async, [this, unit] {
    return units_->Gather(comm_, unit, &prefetched_);
  });
}

Status FsdpPass::FinishPrefetch() {
  if (prefetch_.valid()) prefetch_status_ = prefetch_.get();
  return prefetch_status_;
}

Result<at::Tensor> FsdpPass::TakeUnit(int unit) {
  const Status s = FinishPrefetch();
  const bool mine = prefetch_unit_ == unit;
  prefetch_unit_ = -1;
  prefetch_status_ = Status::OK();
  at::Tensor buffer = std::move(prefetched_);
  prefetched_ = at::Tensor();
  HY_RETURN_IF_ERROR(s);
  if (mine) return buffer;
  HY_RETURN_IF_ERROR(units_->Gather(comm_, unit, &buffer));
  return buffer;
}

at::Tensor* FsdpPass::Piece() {
  if (!piece_.defined()) piece_ = at::zeros({model_->piece()}, at::kFloat);
  return &piece_;
}

std::function<at::Tensor(const std::string&)> FsdpPass::Lookup() const {
  return [this](const std::string& name) {
    if (units_ == nullptr) return model_->View(full_, name);
    // The vocabulary matrices go through vocab_grad.h's functions, which
    // keep no hold on them once used; the rest of the root unit (norm,
    // value head: small) is copied, so that autograd holding it does not
    // hold the root unit's buffer through the backward.
    const bool vocab =
        name == "model.embed_tokens.weight" || name == "lm_head.weight";
    return units_->View(full_, 0, name, train_ && !vocab);
  };
}

Result<at::Tensor> FsdpPass::RunLayer(size_t layer, const at::Tensor& x,
                                      const LayerContext& c) {
  const int unit = FsdpUnits::LayerUnit(static_cast<int>(layer));
  HY_ASSIGN_OR_RETURN(at::Tensor buffer, TakeUnit(unit));
  // The layer computes without collectives: gather the next one meanwhile.
  if (static_cast<int>(layer) + 1 < model_->config().num_layers) {
    StartPrefetch(FsdpUnits::LayerUnit(static_cast<int>(layer) + 1));
  }
  if (!train_ || !at::GradMode::is_enabled()) {
    return LayerOn(*model_, *units_, buffer, static_cast<int>(layer), x, c);
  }
  try {
    return ShardedLayerFunction::apply(x, buffer,
                                       reinterpret_cast<int64_t>(this),
                                       static_cast<int64_t>(layer), c);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("FSDP layer forward: ") + e.what());
  }
}

Status FsdpPass::Backward(const at::Tensor& loss) {
  if (by_layer()) {
    // The root unit's weights are needed in backward only by the head
    // (which holds them until its backward has run): let them go then,
    // before the layers' backward, keeping the gradient.
    root_grad_ = full_.grad();
    full_ = at::Tensor();
  }
  try {
    loss.backward();
  } catch (const std::exception& e) {
    if (!backward_status_.ok()) return backward_status_;
    return Status::Internal(std::string("backward: ") + e.what());
  }
  return Status::OK();
}

Status FsdpPass::Idle() {
  if (units_ == nullptr) return Status::OK();
  const int layers = model_->config().num_layers;
  at::Tensor buffer;
  for (int i = 0; i < layers; ++i) {
    HY_RETURN_IF_ERROR(units_->Gather(comm_, FsdpUnits::LayerUnit(i), &buffer));
  }
  // Backward's order with prefetch: layer i's gather (the last layer's
  // alone, the others prefetched), the gather of layer i - 1, then layer
  // i's reduction.
  for (int i = layers - 1; i >= 0; --i) {
    const int unit = FsdpUnits::LayerUnit(i);
    if (i == layers - 1) {
      HY_RETURN_IF_ERROR(units_->Gather(comm_, unit, &buffer));
    }
    if (i > 0) {
      HY_RETURN_IF_ERROR(
          units_->Gather(comm_, FsdpUnits::LayerUnit(i - 1), &buffer));
    }
    HY_RETURN_IF_ERROR(units_->ReduceGradient(
        comm_, unit, at::zeros({units_->numel(unit)}, at::kFloat), Piece()));
  }
  return Status::OK();
}

Result<at::Tensor> FsdpPass::GradientPiece() {
  if (units_ == nullptr) return comm_->ReduceScatterSum(full_.grad().detach());
  HY_RETURN_IF_ERROR(FinishPrefetch());  // None is left in flight; if one
                                         // were, it must end first.
  const at::Tensor root = root_grad_.defined() ? root_grad_ : full_.grad();
  HY_RETURN_IF_ERROR(units_->ReduceGradient(comm_, 0, root.detach(), Piece()));
  return piece_;
}

}  // namespace hy::trainer
