// The PPO / SFT objectives on LibTorch tensors, as verl's core_algos.py
// computes them. Per-token tensors are [batch, time]; `mask` is f32 0/1.
// Losses come back as SUMS over the masked tokens, so that ranks holding
// parts of a minibatch can divide by the minibatch's global token count
// and their gradients add up to the token-mean gradient of the whole.
//
// Internal to hy_trainer_ppo. Thread-safety: pure functions.

#ifndef HY_TRAINER_PPO_PPO_H_
#define HY_TRAINER_PPO_PPO_H_

#include <ATen/ATen.h>

namespace hy::trainer {

// Log-probabilities of `targets` [B, T] (int64) under logits [B, T, V]
// (the model's whole vocabulary) divided by `temperature`, and
// (when `entropy` is non-null) the per-token entropy of that distribution.
at::Tensor TokenLogProbs(const at::Tensor& logits, const at::Tensor& targets,
                         double temperature, at::Tensor* entropy);

struct PolicyLoss {
  at::Tensor loss_sum;   // Scalar: sum over masked tokens.
  double clipped = 0;    // Masked tokens where the clip was active.
  double approx_kl = 0;  // Sum over masked tokens of old_logp - logp.
};

// Clipped surrogate: ratio = exp(clamp(logp - old_logp, -20, 20)),
// per-token loss max(-A * ratio, -A * clamp(ratio, 1 - eps, 1 + eps)),
// each token's loss times `weights` where defined (truncated importance
// sampling); the clip and KL statistics count tokens unweighted.
PolicyLoss ClippedPolicyLoss(const at::Tensor& logp, const at::Tensor& old_logp,
                             const at::Tensor& advantages,
                             const at::Tensor& mask, double clip_ratio,
                             const at::Tensor& weights = at::Tensor());

// Truncated importance-sampling weights [B, T] of the tokens a rollout
// engine sampled: min(exp(old_logp - engine_logp), cap), no gradient.
// REQUIRES: cap > 0.
at::Tensor TruncatedIsWeights(const at::Tensor& old_logp,
                              const at::Tensor& engine_logp, double cap);

// Clipped value loss: 0.5 * max((v - R)^2, (v_old + clamp(v - v_old, -c, c)
// - R)^2), summed over masked tokens.
at::Tensor ClippedValueLoss(const at::Tensor& values,
                            const at::Tensor& old_values,
                            const at::Tensor& returns, const at::Tensor& mask,
                            double cliprange);

}  // namespace hy::trainer

#endif  // HY_TRAINER_PPO_PPO_H_
