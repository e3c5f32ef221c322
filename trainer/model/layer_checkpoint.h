// Activation checkpointing of one decoder layer: the forward runs without
// recording the graph and keeps only its input; the backward runs the layer
// again with the graph on and backpropagates through it. Gradients equal
// those of the plain layer (the same operations in the same order); the
// memory a layer's activations take is held for one layer at a time.
//
// Internal to hy_trainer_model. Thread-safety: pure function of its inputs.

#ifndef HY_TRAINER_MODEL_LAYER_CHECKPOINT_H_
#define HY_TRAINER_MODEL_LAYER_CHECKPOINT_H_

#include <ATen/ATen.h>

#include "hy/trainer/model/model.h"

namespace torch::autograd {
struct AutogradContext;
}  // namespace torch::autograd

namespace hy::trainer {

// DecoderLayer(config, l, x, c) without TP or cache, checkpointed.
// REQUIRES: `config` outlives the backward of the result (the worker's
// config does).
at::Tensor CheckpointedLayer(const ModelConfig& config, const LayerWeights& l,
                             const at::Tensor& x, const LayerContext& c);

// A LayerContext kept in an autograd node's saved data and restored in its
// backward (for the custom functions that run a layer again there).
void SaveLayerContext(torch::autograd::AutogradContext* ctx,
                      const LayerContext& c);
LayerContext LoadLayerContext(torch::autograd::AutogradContext* ctx);

}  // namespace hy::trainer

#endif  // HY_TRAINER_MODEL_LAYER_CHECKPOINT_H_
