// The embedding lookup and the output projection with their weight's
// gradient added straight into the weight's .grad: for a vocabulary-sized
// matrix (151,936 x 896 for Qwen2-0.5B: 544 MB in f32) autograd otherwise
// builds a full-size gradient per use and, with tied embeddings, their sum
// before adding it to .grad: three such matrices at once, the largest part
// of an FSDP step's peak. Here the lookup's backward index-adds its rows
// and the projection's backward runs one GEMM into .grad (beta = 1).
//
// Used where the weight is a leaf whose .grad is already defined (FsdpModel
// hands out such leaves on its gathered buffer) and grad mode is on;
// elsewhere (rollout, reference, TP) the plain operations run. The values
// are those of the plain operations up to the order of float additions.
// The autograd graph keeps no reference to the weight's leaf: the lookup
// drops the weight after its forward, the projection after its backward,
// so the caller decides how long the weight's memory lives.
//
// Internal to hy_trainer. Thread-safety: pure functions of their inputs.

#ifndef HY_TRAINER_VOCAB_GRAD_H_
#define HY_TRAINER_VOCAB_GRAD_H_

#include <ATen/ATen.h>

namespace hy::trainer {

// Whether `w`'s gradient can go straight into w.grad(): an f32 leaf that
// requires grad, whose .grad is defined, with grad mode on.
bool GradGoesInPlace(const at::Tensor& w);

// at::embedding(w, tokens). REQUIRES: GradGoesInPlace(w).
at::Tensor EmbeddingIntoGrad(const at::Tensor& w, const at::Tensor& tokens);

// at::linear(x, w) (no bias). REQUIRES: GradGoesInPlace(w).
at::Tensor LinearIntoGrad(const at::Tensor& x, const at::Tensor& w);

}  // namespace hy::trainer

#endif  // HY_TRAINER_VOCAB_GRAD_H_
