#include "ppo.h"

namespace hy::trainer {

at::Tensor TokenLogProbs(const at::Tensor& logits, const at::Tensor& targets,
                         double temperature, at::Tensor* entropy) {
  at::Tensor z = logits / temperature;
  at::Tensor logp_all = at::log_softmax(z, -1);
  if (entropy != nullptr) {
    *entropy = -(logp_all.exp() * logp_all).sum(-1);
  }
  return logp_all.gather(-1, targets.to(logits.device()).unsqueeze(-1))
      .squeeze(-1);
}

PolicyLoss ClippedPolicyLoss(const at::Tensor& logp, const at::Tensor& old_logp,
                             const at::Tensor& advantages,
                             const at::Tensor& mask, double clip_ratio,
                             const at::Tensor& weights) {
  at::Tensor log_ratio = (logp - old_logp).clamp(-20.0, 20.0);
  at::Tensor ratio = log_ratio.exp();
  at::Tensor pg1 = -advantages * ratio;
  at::Tensor pg2 =
      -advantages * ratio.clamp(1.0 - clip_ratio, 1.0 + clip_ratio);
  PolicyLoss out;
  out.loss_sum = (at::max(pg1, pg2) * (weights.defined() ? mask * weights
                                                         : mask))
                     .sum();
  out.clipped = ((pg2 > pg1).to(at::kFloat) * mask).sum().item<double>();
  out.approx_kl = (-log_ratio.detach() * mask).sum().item<double>();
  return out;
}

at::Tensor ClippedValueLoss(const at::Tensor& values,
                            const at::Tensor& old_values,
                            const at::Tensor& returns, const at::Tensor& mask,
                            double cliprange) {
  at::Tensor clipped =
      old_values + (values - old_values).clamp(-cliprange, cliprange);
  at::Tensor l1 = (values - returns).pow(2);
  at::Tensor l2 = (clipped - returns).pow(2);
  return 0.5 * (at::max(l1, l2) * mask).sum();
}

at::Tensor TruncatedIsWeights(const at::Tensor& old_logp,
                              const at::Tensor& engine_logp, double cap) {
  return (old_logp - engine_logp).clamp_max(20).exp().clamp_max(cap).detach();
}

}  // namespace hy::trainer
