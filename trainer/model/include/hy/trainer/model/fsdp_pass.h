// FsdpPass: one forward (and, for training, one backward) of an FsdpModel
// on this rank, with its parameters gathered either whole (one flat unit:
// the whole f32 model and its gradient live for the pass) or a unit at a
// time (trainer.fsdp_per_layer, PyTorch FSDP wrapping each decoder layer):
// each decoder layer only while it runs. By layer, training recomputes each
// layer in backward (its weights and activations are not kept): the layer's
// weights are gathered again there, the layer runs again and backpropagates,
// and its gradient is reduced to the ranks that hold it at once. The next
// layer's gather runs while a layer computes (prefetch). The vocabulary
// matrices (embedding, lm_head) are never gathered whole: the lookup
// gathers the rows the step's tokens use, the projection a chunk of rows at
// a time, and a chunk's gradient is reduced as soon as it is computed
// (fsdp_vocab.h); the rest of the root unit (final norm, score head) is
// gathered for the pass. Peak memory per rank is then its piece (params,
// two moments) + the gradient piece + two layers' weights and one's
// gradient + a chunk's rows and gradient + the looked-up rows and their
// gradient + activations.
// Both ways give bit-identical gradients (see fsdp_unit.h): the whole
// buffer's vocabulary matrices go through the same chunks (WholeVocab).
//
// Every rank runs the same sequence of collectives: a rank with no rows in
// a step calls Idle() where the others run forward and backward.
//
// Usage:
//   auto pass = FsdpPass::Begin(model, units, comm, /*train=*/true);
//   Weights w = pass->Bind();
//   Trunk(..., pass->runner()); LmHead(w, ...); loss; pass->Backward(loss);
//   Result<at::Tensor> piece = pass->GradientPiece();
//
// Part of hy_trainer_model (LibTorch; ppo/ uses it). Holds pointers to the
// model, units and comm, which outlive it. Thread-safety: one thread.

#ifndef HY_TRAINER_MODEL_FSDP_PASS_H_
#define HY_TRAINER_MODEL_FSDP_PASS_H_

#include <ATen/ATen.h>

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hy/trainer/model/fsdp.h"
#include "hy/trainer/model/fsdp_unit.h"
#include "hy/trainer/model/model.h"
#include "hy/trainer/model/vocab_matrix.h"

namespace hy::trainer {

class Comm;

class FsdpPass {
 public:
  // Gathers what the forward needs first: the whole model (units null) or
  // the root unit's tensors other than the vocabulary matrices. With
  // `train`, gradients are collected. vocab_chunk_rows: the rows of a
  // vocabulary matrix projected (and gathered) at a time; 0 for
  // VocabMatrix::DefaultChunkRows. Returns the gather's errors.
  static Result<std::unique_ptr<FsdpPass>> Begin(FsdpModel* model,
                                                 const FsdpUnits* units,
                                                 Comm* comm, bool train,
                                                 int64_t vocab_chunk_rows = 0);
  ~FsdpPass();

  bool by_layer() const { return units_ != nullptr; }
  // The model's weights for Trunk, LmHead and ValueHead: the vocabulary
  // matrices as this pass's VocabMatrix objects (valid while it lives),
  // the decoder layers left to the runner when by layer. Errors as
  // BindWeights.
  Result<Weights> Bind() const;
  // Trunk's layer runner: null for the whole model.
  const LayerRunner* runner() const { return by_layer() ? &runner_ : nullptr; }

  // loss.backward(); a layer's failed gather or reduction in backward is
  // returned as its Status. REQUIRES: train.
  Status Backward(const at::Tensor& loss);
  // The collectives another rank's forward and backward make, with a zero
  // gradient, for a rank with no rows this step. Returns
  // FailedPrecondition for a pass that does not train, comm errors.
  Status Idle();
  // This rank's gradient piece [model.piece()], summed over ranks in rank
  // order. REQUIRES: train, after Backward or Idle. Returns comm errors.
  Result<at::Tensor> GradientPiece();

 private:
  FsdpPass() = default;
  at::Tensor Lookup(const std::string& name) const;
  // The matrix LmHead projects with (null for a critic).
  VocabMatrix* HeadMatrix() const;
  Result<at::Tensor> RunLayer(size_t layer, const at::Tensor& x,
                              const LayerContext& c);
  friend struct ShardedLayerFunction;

  // Prefetch (PyTorch FSDP's forward and backward prefetch): the gather of
  // the layer that runs next starts on another thread while the current
  // one computes. At most one is in flight, and it is finished before this
  // rank makes any other collective, so the collectives keep one order on
  // every rank (Idle makes the same sequence).
  // Starts gathering `unit`. REQUIRES: none in flight.
  void StartPrefetch(int unit);
  // Waits for the gather in flight, if any; returns its status (kept, with
  // its buffer, for TakeUnit).
  Status FinishPrefetch();
  // `unit` gathered: the prefetched buffer if it is that unit's, else
  // gathered now (after finishing any other prefetch).
  Result<at::Tensor> TakeUnit(int unit);

  FsdpModel* model_ = nullptr;
  const FsdpUnits* units_ = nullptr;
  Comm* comm_ = nullptr;
  bool train_ = false;
  // The whole flat buffer, or (by layer) the root unit's tensors other than
  // the vocabulary matrices, with rest_at_ giving (tensor, offset in it).
  at::Tensor full_;
  std::vector<std::pair<int, int64_t>> rest_at_;
  std::unique_ptr<VocabMatrix> embed_, head_;  // head_: an untied lm_head.
  // By layer, training: the gradient piece the units reduce into
  // (allocated at the first reduction, in the head's backward).
  at::Tensor piece_;
  at::Tensor* Piece();
  Status backward_status_;
  LayerRunner runner_;
  int prefetch_unit_ = -1;  // The unit prefetched (in flight or done).
  std::future<Status> prefetch_;
  Status prefetch_status_;
  at::Tensor prefetched_;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_MODEL_FSDP_PASS_H_
