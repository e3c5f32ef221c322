#include "hy/trainer/ppo/advantage.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace hy::trainer {
namespace {

std::string ShapeString(Shape2D shape) {
  return "[" + std::to_string(shape.batch) + "][" + std::to_string(shape.time) +
         "]";
}

Status CheckSize(const char* what, size_t got, size_t want, Shape2D shape) {
  if (got == want) return Status::OK();
  return Status::InvalidArgument(
      std::string(what) + " has " + std::to_string(got) + " elements, shape " +
      ShapeString(shape) + " needs " + std::to_string(want));
}

size_t CountValid(const Mask& mask) {
  return static_cast<size_t>(
      std::count_if(mask.begin(), mask.end(), [](uint8_t m) { return m; }));
}

}  // namespace

Result<double> MaskedMean(const std::vector<float>& values, const Mask& mask,
                          Shape2D shape) {
  HY_RETURN_IF_ERROR(CheckSize("values", values.size(), shape.size(), shape));
  HY_RETURN_IF_ERROR(CheckSize("mask", mask.size(), shape.size(), shape));
  double sum = 0.0;
  size_t n = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (mask[i]) {
      sum += values[i];
      ++n;
    }
  }
  if (n == 0) return Status::InvalidArgument("MaskedMean: no valid token");
  return sum / static_cast<double>(n);
}

Result<std::vector<float>> MaskedWhiten(const std::vector<float>& values,
                                        const Mask& mask, Shape2D shape,
                                        bool shift_mean) {
  HY_RETURN_IF_ERROR(CheckSize("values", values.size(), shape.size(), shape));
  HY_RETURN_IF_ERROR(CheckSize("mask", mask.size(), shape.size(), shape));
  const size_t n = CountValid(mask);
  if (n < 2) {
    return Status::InvalidArgument(
        "MaskedWhiten: needs at least 2 valid tokens for the unbiased "
        "variance, got " +
        std::to_string(n));
  }
  HY_ASSIGN_OR_RETURN(const double mean, MaskedMean(values, mask, shape));
  double sq = 0.0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (mask[i]) sq += (values[i] - mean) * (values[i] - mean);
  }
  const double nd = static_cast<double>(n);
  const double var = sq / nd * (nd / (nd - 1.0));
  const double inv_std = 1.0 / std::sqrt(var + 1e-8);
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    double w = (values[i] - mean) * inv_std;
    if (!shift_mean) w += mean;
    out[i] = static_cast<float>(w);
  }
  return out;
}

Result<GaeResult> ComputeGae(const std::vector<float>& token_rewards,
                             const std::vector<float>& values, const Mask& mask,
                             Shape2D shape, const GaeConfig& config) {
  HY_RETURN_IF_ERROR(
      CheckSize("token_rewards", token_rewards.size(), shape.size(), shape));
  HY_RETURN_IF_ERROR(CheckSize("values", values.size(), shape.size(), shape));
  HY_RETURN_IF_ERROR(CheckSize("mask", mask.size(), shape.size(), shape));
  if (!(config.gamma >= 0.0 && config.gamma <= 1.0) ||
      !(config.lam >= 0.0 && config.lam <= 1.0)) {
    return Status::InvalidArgument(
        "ComputeGae: gamma and lam must be in [0, 1]");
  }
  GaeResult out;
  out.advantages.assign(shape.size(), 0.0f);
  out.returns.assign(shape.size(), 0.0f);
  for (size_t b = 0; b < shape.batch; ++b) {
    const size_t row = b * shape.time;
    double next_value = 0.0;
    double last_gae = 0.0;
    for (size_t t = shape.time; t-- > 0;) {
      const size_t i = row + t;
      const double delta =
          token_rewards[i] + config.gamma * next_value - values[i];
      const double gae = delta + config.gamma * config.lam * last_gae;
      if (mask[i]) {
        next_value = values[i];
        last_gae = gae;
      }
      out.advantages[i] = static_cast<float>(last_gae);
      out.returns[i] = static_cast<float>(last_gae + values[i]);
    }
  }
  if (config.whiten_advantages) {
    HY_ASSIGN_OR_RETURN(out.advantages,
                        MaskedWhiten(out.advantages, mask, shape));
  }
  return out;
}

Result<std::vector<float>> ComputeGrpoAdvantages(
    const std::vector<float>& scores, const std::vector<int64_t>& group_ids,
    const Mask& mask, Shape2D shape, double epsilon, bool norm_by_std) {
  const Shape2D rows{shape.batch, 1};
  HY_RETURN_IF_ERROR(CheckSize("scores", scores.size(), shape.batch, rows));
  HY_RETURN_IF_ERROR(
      CheckSize("group_ids", group_ids.size(), shape.batch, rows));
  HY_RETURN_IF_ERROR(CheckSize("mask", mask.size(), shape.size(), shape));
  std::map<int64_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < shape.batch; ++i) groups[group_ids[i]].push_back(i);
  std::vector<double> scalar(shape.batch, 0.0);
  for (const auto& [id, members] : groups) {
    double mean = 0.0;
    double std_dev = 1.0;
    if (members.size() > 1) {
      const double n = static_cast<double>(members.size());
      for (size_t i : members) mean += scores[i];
      mean /= n;
      double sq = 0.0;
      for (size_t i : members) sq += (scores[i] - mean) * (scores[i] - mean);
      std_dev = std::sqrt(sq / (n - 1.0));
    }
    for (size_t i : members) {
      scalar[i] = norm_by_std ? (scores[i] - mean) / (std_dev + epsilon)
                              : scores[i] - mean;
    }
  }
  std::vector<float> out(shape.size(), 0.0f);
  for (size_t b = 0; b < shape.batch; ++b) {
    for (size_t t = 0; t < shape.time; ++t) {
      const size_t i = b * shape.time + t;
      if (mask[i]) out[i] = static_cast<float>(scalar[b]);
    }
  }
  return out;
}

Result<std::vector<float>> KlPenalty(const std::vector<float>& logp,
                                     const std::vector<float>& ref_logp,
                                     KlEstimator estimator) {
  if (logp.size() != ref_logp.size()) {
    return Status::InvalidArgument(
        "KlPenalty: logp has " + std::to_string(logp.size()) +
        " elements, ref_logp " + std::to_string(ref_logp.size()));
  }
  std::vector<float> out(logp.size());
  for (size_t i = 0; i < logp.size(); ++i) {
    const double d = static_cast<double>(logp[i]) - ref_logp[i];
    double k = 0.0;
    switch (estimator) {
      case KlEstimator::kK1:
        k = d;
        break;
      case KlEstimator::kAbs:
        k = std::fabs(d);
        break;
      case KlEstimator::kK2:
        k = 0.5 * d * d;
        break;
      case KlEstimator::kK3: {
        const double kl = std::clamp(-d, -20.0, 20.0);
        k = std::clamp(std::exp(kl) - kl - 1.0, -10.0, 10.0);
        break;
      }
    }
    out[i] = static_cast<float>(k);
  }
  return out;
}

Result<TokenRewards> ComputeTokenLevelRewards(
    const std::vector<float>& sequence_scores, const std::vector<float>& kl,
    const Mask& mask, Shape2D shape, double beta) {
  HY_RETURN_IF_ERROR(CheckSize("sequence_scores", sequence_scores.size(),
                               shape.batch, Shape2D{shape.batch, 1}));
  HY_RETURN_IF_ERROR(CheckSize("kl", kl.size(), shape.size(), shape));
  HY_RETURN_IF_ERROR(CheckSize("mask", mask.size(), shape.size(), shape));
  TokenRewards out;
  out.rewards.assign(shape.size(), 0.0f);
  double kl_sum = 0.0;
  for (size_t b = 0; b < shape.batch; ++b) {
    const size_t row = b * shape.time;
    double row_kl = 0.0;
    size_t n = 0;
    size_t last = shape.time;  // time = none valid.
    for (size_t t = 0; t < shape.time; ++t) {
      if (!mask[row + t]) continue;
      out.rewards[row + t] = static_cast<float>(-beta * kl[row + t]);
      row_kl += kl[row + t];
      ++n;
      last = t;
    }
    if (last < shape.time) {
      out.rewards[row + last] = static_cast<float>(
          sequence_scores[b] - beta * static_cast<double>(kl[row + last]));
    }
    if (n > 0) kl_sum += row_kl / static_cast<double>(n);
  }
  out.mean_kl =
      shape.batch > 0 ? kl_sum / static_cast<double>(shape.batch) : 0.0;
  return out;
}

KlController KlController::Fixed(double coef) {
  return KlController(coef, /*adaptive=*/false, 0.0, 0.0);
}

Result<KlController> KlController::Adaptive(double init_coef, double target,
                                            double horizon) {
  if (!(target > 0.0) || !(horizon > 0.0)) {
    return Status::InvalidArgument(
        "KlController: adaptive needs target > 0 and horizon > 0");
  }
  return KlController(init_coef, /*adaptive=*/true, target, horizon);
}

void KlController::Update(double current_kl, int64_t n_steps) {
  if (!adaptive_) return;
  const double error = std::clamp(current_kl / target_ - 1.0, -0.2, 0.2);
  value_ *= 1.0 + error * static_cast<double>(n_steps) / horizon_;
}

}  // namespace hy::trainer
