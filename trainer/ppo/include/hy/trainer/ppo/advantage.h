// Advantage: the PPO / GRPO estimators of the trainer (issue 6), on plain
// host vectors so they are testable without LibTorch. They follow verl's
// verl/trainer/ppo/core_algos.py and verl/utils/torch_functional.py.
//
// Layout. Every per-token quantity is a row-major [batch][time] vector of
// size shape.batch * shape.time (time = response positions). A response
// mask (nonzero = a valid response token, e.g. up to and including EOS)
// comes with it. Per-sequence quantities are vectors of size shape.batch.
//
// Errors. Every function returns InvalidArgument when a vector's size does
// not match the shape, and for the other conditions listed at it; nothing
// is written to the outputs then.
//
// Thread-safety: the free functions are pure. A KlController is a value
// without synchronization: one thread at a time.

#ifndef HY_TRAINER_PPO_ADVANTAGE_H_
#define HY_TRAINER_PPO_ADVANTAGE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"

namespace hy::trainer {

struct Shape2D {
  size_t batch = 0;
  size_t time = 0;
  size_t size() const { return batch * time; }
};

using Mask = std::vector<uint8_t>;

// Mean over the valid tokens: sum(v * m) / sum(m). Returns InvalidArgument
// when no token is valid.
Result<double> MaskedMean(const std::vector<float>& values, const Mask& mask,
                          Shape2D shape);

// verl's masked_whiten: mean and unbiased variance over the valid tokens,
//   var = sum(m * (v - mean)^2) / sum(m) * n / (n - 1),   n = sum(m)
//   out = (v - mean) / sqrt(var + 1e-8)     (+ mean if !shift_mean)
// applied to every position, masked ones included (their values are
// meaningless and callers ignore them, as verl's do). Returns
// InvalidArgument when fewer than 2 tokens are valid (verl raises there).
Result<std::vector<float>> MaskedWhiten(const std::vector<float>& values,
                                        const Mask& mask, Shape2D shape,
                                        bool shift_mean = true);

struct GaeConfig {
  double gamma = 1.0;
  double lam = 1.0;
  // verl's compute_gae_advantage_return whitens the advantages (not the
  // returns) before returning them; false gives the raw GAE.
  bool whiten_advantages = true;
};

struct GaeResult {
  std::vector<float> advantages;  // [batch][time]
  std::vector<float> returns;     // [batch][time], raw advantages + values
};

// GAE as verl's compute_gae_advantage_return: per row, scanning t from
// time-1 down to 0 with next_value = 0, last_gae = 0:
//   delta    = r[t] + gamma * next_value - v[t]
//   gae      = delta + gamma * lam * last_gae
//   if m[t]:  next_value = v[t]; last_gae = gae       (else both carried)
//   adv[t]   = last_gae
// so masked positions are skipped: their values never enter a valid
// token's estimate, and a masked position holds the carried estimate (0
// after the last valid token). returns = adv + values (before whitening).
// The scan runs in double and stores floats (verl runs in float32, so the
// last bit may differ). Returns InvalidArgument for a size mismatch, gamma
// or lam outside [0, 1], or (with whitening) fewer than 2 valid tokens.
Result<GaeResult> ComputeGae(const std::vector<float>& token_rewards,
                             const std::vector<float>& values, const Mask& mask,
                             Shape2D shape, const GaeConfig& config);

// GRPO outcome advantages as verl's compute_grpo_outcome_advantage. Rows
// with equal group_ids[i] form a group (responses to one prompt). For row i
// in group g with score s_i:
//   a_i = (s_i - mean_g) / (std_g + epsilon)   (norm_by_std)
//   a_i =  s_i - mean_g                        (!norm_by_std, Dr. GRPO)
// std_g is the unbiased standard deviation; a group of one row uses
// mean 0, std 1 (as verl). out[i][t] = a_i * m[i][t]. Returns
// InvalidArgument for size mismatches.
Result<std::vector<float>> ComputeGrpoAdvantages(
    const std::vector<float>& scores, const std::vector<int64_t>& group_ids,
    const Mask& mask, Shape2D shape, double epsilon = 1e-6,
    bool norm_by_std = true);

enum class KlEstimator {
  kK1,   // logp - ref_logp                           ("kl" / "k1")
  kAbs,  // |logp - ref_logp|                         ("abs")
  kK2,   // 0.5 * (logp - ref_logp)^2                 ("mse" / "k2")
  kK3,   // ratio - 1 - kl, kl = clamp(ref_logp - logp, -20, 20),
         // ratio = exp(kl), result clamped to [-10, 10] ("low_var_kl"/"k3")
};

// Per-token KL estimates as verl's kl_penalty (unmasked; callers mask).
// Returns InvalidArgument when the two sizes differ.
Result<std::vector<float>> KlPenalty(const std::vector<float>& logp,
                                     const std::vector<float>& ref_logp,
                                     KlEstimator estimator);

struct TokenRewards {
  std::vector<float> rewards;  // [batch][time]
  // verl's "actor/reward_kl_penalty": the batch mean of each row's masked
  // mean KL (a row without valid tokens contributes 0). What the adaptive
  // controller is updated with.
  double mean_kl = 0.0;
};

// As verl's apply_kl_penalty with the score placed as its reward managers
// do: rewards[i][t] = score_i * [t == last valid t of row i]
//                     - beta * kl[i][t] * m[i][t].
// A row without valid tokens gets all zeros. Returns InvalidArgument for
// size mismatches.
Result<TokenRewards> ComputeTokenLevelRewards(
    const std::vector<float>& sequence_scores, const std::vector<float>& kl,
    const Mask& mask, Shape2D shape, double beta);

// The KL coefficient beta, fixed or adaptive (verl's FixedKLController /
// AdaptiveKLController, after Ziegler et al. 2019):
//   error  = clip(current_kl / target - 1, -0.2, 0.2)
//   value *= 1 + error * n_steps / horizon
class KlController {
 public:
  static KlController Fixed(double coef);
  // Returns InvalidArgument unless target > 0 and horizon > 0.
  static Result<KlController> Adaptive(double init_coef, double target,
                                       double horizon);

  double value() const { return value_; }
  bool adaptive() const { return adaptive_; }

  // n_steps: samples in the batch just trained on (verl passes the batch
  // size). No-op for a fixed controller.
  void Update(double current_kl, int64_t n_steps);

 private:
  KlController(double value, bool adaptive, double target, double horizon)
      : value_(value),
        adaptive_(adaptive),
        target_(target),
        horizon_(horizon) {}

  double value_;
  bool adaptive_;
  double target_;
  double horizon_;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_PPO_ADVANTAGE_H_
