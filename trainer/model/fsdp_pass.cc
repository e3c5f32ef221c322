#include "hy/trainer/model/fsdp_pass.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "fsdp_vocab.h"
#include "hy/trainer/model/comm.h"
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

namespace {

bool IsVocab(const std::string& name) {
  return name == "model.embed_tokens.weight" || name == "lm_head.weight";
}

bool InRootUnit(const std::string& name) {
  return name.rfind("model.layers.", 0) != 0;
}

}  // namespace

Result<std::unique_ptr<FsdpPass>> FsdpPass::Begin(FsdpModel* model,
                                                  const FsdpUnits* units,
                                                  Comm* comm, bool train,
                                                  int64_t vocab_chunk_rows) {
  std::unique_ptr<FsdpPass> pass(new FsdpPass());
  FsdpPass* raw = pass.get();
  pass->model_ = model;
  pass->units_ = units;
  pass->comm_ = comm;
  pass->train_ = train;
  const auto& tensors = model->spec().tensors;
  if (units == nullptr) {
    HY_RETURN_IF_ERROR(model->Gather(comm, &pass->full_));
    if (train) FsdpModel::TrackGradient(&pass->full_);
  } else {
    int64_t total = 0;
    for (int t = 0; t < model->num_tensors(); ++t) {
      const std::string& name = tensors[t].meta.name;
      if (!InRootUnit(name) || IsVocab(name)) continue;
      pass->rest_at_.push_back({t, total});
      total += model->numel(t);
    }
    pass->full_ = at::empty({total}, model->params().options());
    std::vector<FsdpUnits::FlatRun> runs;
    for (const auto& [t, at] : pass->rest_at_) {
      runs.push_back({model->offset(t), model->offset(t) + model->numel(t),
                      pass->full_.data_ptr<float>() + at});
    }
    HY_RETURN_IF_ERROR(units->GatherRuns(comm, runs));
    if (train) FsdpModel::TrackGradient(&pass->full_);
    pass->runner_ = [raw](size_t layer, const at::Tensor& x,
                          const LayerContext& c) {
      return raw->RunLayer(layer, x, c);
    };
  }
  for (int t = 0; t < model->num_tensors(); ++t) {
    const std::string& name = tensors[t].meta.name;
    if (!IsVocab(name)) continue;
    std::unique_ptr<VocabMatrix> m;
    if (units == nullptr) {
      const auto& shape = tensors[t].meta.shape;
      auto region = [&](const at::Tensor& flat) {
        return flat.narrow(0, model->offset(t), model->numel(t)).view(shape);
      };
      m = std::make_unique<WholeVocab>(
          region(pass->full_),
          train ? region(pass->full_.grad()) : at::Tensor(), vocab_chunk_rows);
    } else {
      m = std::make_unique<ShardedVocab>(model, units, comm, t, train,
                                         vocab_chunk_rows,
                                         [raw] { return raw->Piece(); });
    }
    (name == "lm_head.weight" ? pass->head_ : pass->embed_) = std::move(m);
  }
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
  if (!piece_.defined()) {
    piece_ = at::zeros({model_->piece()}, model_->params().options());
  }
  return &piece_;
}

at::Tensor FsdpPass::Lookup(const std::string& name) const {
  if (units_ == nullptr) return model_->View(full_, name);
  // By layer: the vocabulary matrices are this pass's VocabMatrix objects
  // (an empty stand-in here); the layers are the runner's.
  if (IsVocab(name)) return at::empty({0}, model_->params().options());
  for (const auto& [t, at] : rest_at_) {
    const auto& meta = model_->spec().tensors[t].meta;
    if (meta.name == name) {
      return FsdpModel::ViewAt(full_, at, model_->numel(t), meta.shape);
    }
  }
  return at::Tensor();
}

VocabMatrix* FsdpPass::HeadMatrix() const {
  if (model_->role() == ModelRole::kCritic) return nullptr;
  return head_ != nullptr ? head_.get() : embed_.get();
}

Result<Weights> FsdpPass::Bind() const {
  HY_ASSIGN_OR_RETURN(
      Weights w, BindWeights(
                     model_->config(), model_->role(),
                     [this](const std::string& name) { return Lookup(name); },
                     !by_layer()));
  w.embed_rows = embed_.get();
  w.head_rows = HeadMatrix();
  return w;
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
  try {
    loss.backward();
  } catch (const std::exception& e) {
    if (!backward_status_.ok()) return backward_status_;
    for (const auto* m : {embed_.get(), head_.get()}) {
      if (m != nullptr && !m->failure().ok()) return m->failure();
    }
    return Status::Internal(std::string("backward: ") + e.what());
  }
  return Status::OK();
}

Status FsdpPass::Idle() {
  if (!train_) {
    return Status::FailedPrecondition(
        "FsdpPass::Idle on a pass that does "
        "not train");
  }
  if (units_ == nullptr) return Status::OK();
  const int layers = model_->config().num_layers;
  // The forward: the lookup, the layers, the head's chunks.
  at::Tensor local;
  HY_RETURN_IF_ERROR(
      embed_->LookupRows(at::empty({0}, at::kLong), &local).status());
  at::Tensor buffer;
  for (int i = 0; i < layers; ++i) {
    HY_RETURN_IF_ERROR(units_->Gather(comm_, FsdpUnits::LayerUnit(i), &buffer));
  }
  VocabMatrix* head = HeadMatrix();
  const int64_t chunk = head == nullptr ? 1 : head->chunk_rows();
  for (int64_t b = 0; head != nullptr && b < head->rows(); b += chunk) {
    HY_RETURN_IF_ERROR(
        head->Rows(b, std::min(chunk, head->rows() - b)).status());
  }
  // The head's backward (the hidden states always need their gradient).
  for (int64_t b = 0; head != nullptr && b < head->rows(); b += chunk) {
    const int64_t n = std::min(chunk, head->rows() - b);
    HY_RETURN_IF_ERROR(head->Rows(b, n).status());
    HY_RETURN_IF_ERROR(head->GradRows(b, n).status());
    HY_RETURN_IF_ERROR(head->GradRowsDone(b, n));
  }
  // The layers' backward, in its order with prefetch: layer i's gather
  // (the last layer's alone, the others prefetched), the gather of layer
  // i - 1, then layer i's reduction.
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
        comm_, unit,
        at::zeros({units_->numel(unit)}, model_->params().options()), Piece()));
  }
  return Status::OK();
}

Result<at::Tensor> FsdpPass::GradientPiece() {
  if (units_ == nullptr) return comm_->ReduceScatterSum(full_.grad().detach());
  HY_RETURN_IF_ERROR(FinishPrefetch());  // None is left in flight; if one
                                         // were, it must end first.
  // What is left of the root unit: its rest and the looked-up rows.
  float* g = full_.grad().data_ptr<float>();
  std::vector<FsdpUnits::FlatRun> runs;
  for (const auto& [t, at] : rest_at_) {
    runs.push_back(
        {model_->offset(t), model_->offset(t) + model_->numel(t), g + at});
  }
  for (VocabMatrix* m : {embed_.get(), head_.get()}) {
    if (m == nullptr) continue;
    for (const auto& run : static_cast<ShardedVocab*>(m)->LookupGradRuns()) {
      runs.push_back(run);
    }
  }
  HY_RETURN_IF_ERROR(units_->ReduceRuns(comm_, runs, Piece()));
  return piece_;
}

}  // namespace hy::trainer
