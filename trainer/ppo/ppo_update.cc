// PpoWorker: the PPO minibatch updates and the SFT warm-up, both FSDP:
// gather the parameters, forward/backward this rank's rows, reduce-scatter
// the gradient, clip by the global norm, Adam on the local piece.

#include <chrono>
#include <cmath>
#include <numeric>

#include "ppo.h"
#include "ppo_worker.h"

namespace hy::trainer {
namespace {

using Clock = std::chrono::steady_clock;

// SFT batches draw from iterations far beyond any PPO iteration.

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A permutation of [0, n): a pure function of (seed, iteration, epoch).
std::vector<int64_t> Permutation(int64_t n, uint64_t seed, int64_t iteration,
                                 int epoch) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  uint64_t state = Mix(Mix(seed ^ 0x5851F42D4C957F2Dull) ^
                       Mix(static_cast<uint64_t>(iteration) * 0x100 + epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    state = Mix(state);
    const int64_t j =
        static_cast<int64_t>(state % static_cast<uint64_t>(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

// The experience's `rows` (kept on the host) on `device`, where the
// minibatch's losses are taken.
Experience Rows(const Experience& exp, const std::vector<int64_t>& rows,
                const at::Device& device) {
  at::Tensor idx = at::tensor(rows, at::kLong);
  auto pick = [&](const at::Tensor& t) {
    return t.index_select(0, idx).to(device);
  };
  Experience sub;
  sub.prompts.prompt_len = exp.prompts.prompt_len;
  sub.prompts.tokens = pick(exp.prompts.tokens);
  sub.prompts.valid = pick(exp.prompts.valid);
  sub.prompts.lengths = pick(exp.prompts.lengths);
  sub.responses = pick(exp.responses);
  sub.mask = pick(exp.mask);
  sub.old_logp = pick(exp.old_logp);
  sub.values = pick(exp.values);
  sub.advantages = pick(exp.advantages);
  sub.returns = pick(exp.returns);
  if (exp.engine_logp.defined()) sub.engine_logp = pick(exp.engine_logp);
  return sub;
}

}  // namespace

Result<std::unique_ptr<FsdpPass>> PpoWorker::BeginPass(FsdpModel* model,
                                                       bool train) {
  const FsdpUnits* units = model == actor_.get()    ? actor_units_.get()
                           : model == critic_.get() ? critic_units_.get()
                                                    : ref_units_.get();
  return FsdpPass::Begin(model, units, comm_.get(), train);
}

Result<double> PpoWorker::ApplyGradient(FsdpModel* model, FsdpPass* pass,
                                        const OptimConfig& optim) {
  HY_ASSIGN_OR_RETURN(at::Tensor grad, pass->GradientPiece());
  HY_ASSIGN_OR_RETURN(auto sum,
                      comm_->SumAcrossRanks({FsdpModel::SquaredNorm(grad)}));
  const double norm = std::sqrt(sum[0]);
  if (!std::isfinite(norm)) {
    Log("gradient norm is not finite: update skipped");
    return norm;
  }
  double scale = 1.0;
  if (optim.grad_clip > 0 && norm > optim.grad_clip) {
    scale = optim.grad_clip / (norm + 1e-6);
  }
  model->AdamStep(grad, optim, scale);
  return norm;
}

Result<double> PpoWorker::UpdateActor(const Experience* sub, double tokens,
                                      UpdateLosses* losses) {
  const ActorConfig& ac = config_.actor;
  HY_ASSIGN_OR_RETURN(auto pass, BeginPass(actor_.get(), true));
  if (sub != nullptr) {
    at::Tensor entropy;
    HY_ASSIGN_OR_RETURN(at::Tensor logp,
                        ScoreRows(*actor_, *pass, *sub, 0,
                                  sub->responses.size(0), &entropy));
    // actor.tis_cap: each token's policy loss weighted by its truncated
    // importance ratio to the engine that sampled it.
    const at::Tensor tis =
        ac.tis_cap > 0 && sub->engine_logp.defined()
            ? TruncatedIsWeights(sub->old_logp, sub->engine_logp, ac.tis_cap)
            : at::Tensor();
    PolicyLoss pl = ClippedPolicyLoss(logp, sub->old_logp, sub->advantages,
                                      sub->mask, ac.clip_ratio, tis);
    at::Tensor ent_sum = (entropy * sub->mask).sum();
    at::Tensor loss = (pl.loss_sum - ac.entropy_coeff * ent_sum) / tokens;
    HY_RETURN_IF_ERROR(pass->Backward(loss));
    losses->policy += pl.loss_sum.item<double>() / tokens;
    losses->entropy += ent_sum.item<double>() / tokens;
    losses->clipped += pl.clipped / tokens;
  } else {
    HY_RETURN_IF_ERROR(pass->Idle());
  }
  return ApplyGradient(actor_.get(), pass.get(), ac.optim);
}

Status PpoWorker::UpdateCritic(const Experience* sub, double tokens,
                               UpdateLosses* losses) {
  HY_ASSIGN_OR_RETURN(auto pass, BeginPass(critic_.get(), true));
  if (sub != nullptr) {
    HY_ASSIGN_OR_RETURN(at::Tensor values,
                        ScoreRows(*critic_, *pass, *sub, 0,
                                  sub->responses.size(0), nullptr));
    at::Tensor loss =
        ClippedValueLoss(values, sub->values, sub->returns, sub->mask,
                         config_.critic.cliprange_value) /
        tokens;
    HY_RETURN_IF_ERROR(pass->Backward(loss));
    losses->value += loss.item<double>();
  } else {
    HY_RETURN_IF_ERROR(pass->Idle());
  }
  return ApplyGradient(critic_.get(), pass.get(), config_.critic.optim)
      .status();
}

Result<double> PpoWorker::UpdateMinibatch(const Experience& exp,
                                          const std::vector<int64_t>& batch,
                                          UpdateLosses* losses) {
  double tokens = 0;
  for (int64_t i : batch) tokens += exp.mask[i].sum().item<double>();
  tokens = std::max(tokens, 1.0);
  int64_t lo, hi;
  Split(static_cast<int64_t>(batch.size()), &lo, &hi);
  std::vector<int64_t> mine(batch.begin() + lo, batch.begin() + hi);
  Experience sub;
  if (!mine.empty()) sub = Rows(exp, mine, comm_->device());
  const Experience* rows = mine.empty() ? nullptr : &sub;
  HY_ASSIGN_OR_RETURN(const double grad_norm,
                      UpdateActor(rows, tokens, losses));
  if (config_.algorithm.adv_estimator == AdvEstimator::kGae) {
    HY_RETURN_IF_ERROR(UpdateCritic(rows, tokens, losses));
  }
  return grad_norm;
}

Status PpoWorker::Update(int64_t iteration, const Experience& exp,
                         IterationReport* report) {
  const auto start = Clock::now();
  const int64_t total = exp.responses.size(0);
  const int64_t mb =
      std::min<int64_t>(config_.actor.ppo_mini_batch_size, total);
  // Local sums, each divided by its minibatch's global token count.
  UpdateLosses losses;
  double grad_norm = 0;
  int64_t steps = 0;
  for (int epoch = 0; epoch < config_.actor.ppo_epochs; ++epoch) {
    const std::vector<int64_t> perm =
        Permutation(total, config_.trainer.seed, iteration, epoch);
    for (int64_t begin = 0; begin < total; begin += mb) {
      const int64_t end = std::min(total, begin + mb);
      std::vector<int64_t> batch(perm.begin() + begin, perm.begin() + end);
      HY_ASSIGN_OR_RETURN(grad_norm, UpdateMinibatch(exp, batch, &losses));
      ++steps;
    }
  }
  HY_ASSIGN_OR_RETURN(auto sums,
                      comm_->SumAcrossRanks({losses.policy, losses.value,
                                             losses.entropy, losses.clipped}));
  const double n = static_cast<double>(std::max<int64_t>(steps, 1));
  report->policy_loss = sums[0] / n;
  report->value_loss = sums[1] / n;
  report->entropy = sums[2] / n;
  report->clip_frac = sums[3] / n;
  report->grad_norm = grad_norm;
  report->train_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return Status::OK();
}

Result<at::Tensor> PpoWorker::SftLoss(const FsdpPass& pass,
                                      const SftBatch& batch, int64_t lo,
                                      int64_t hi) {
  const int64_t b = hi - lo;
  const int64_t max_len = batch.max_len;
  at::Tensor tok = at::full({b, max_len}, source_->token_spec().pad, at::kLong);
  at::Tensor valid = at::zeros({b, max_len}, at::kBool);
  at::Tensor target_mask = at::zeros({b, max_len - 1}, at::kFloat);
  for (int64_t i = 0; i < b; ++i) {
    const auto& s = batch.seqs[lo + i];
    for (size_t j = 0; j < s.size(); ++j) {
      tok[i][j] = s[j];
      valid[i][j] = true;
      if (j >= static_cast<size_t>(batch.prompt_lens[lo + i])) {
        target_mask[i][j - 1] = 1.0;
      }
    }
  }
  at::Tensor positions = (valid.to(at::kLong).cumsum(1) - 1).clamp_min(0);
  HY_ASSIGN_OR_RETURN(Weights w, pass.Bind());
  HY_ASSIGN_OR_RETURN(
      at::Tensor hidden,
      Trunk(config_.model, w, tok, positions, valid, TpContext{}, nullptr,
            config_.trainer.gradient_checkpointing, pass.runner()));
  HY_ASSIGN_OR_RETURN(at::Tensor logits,
                      LmHead(w, hidden.narrow(1, 0, max_len - 1), TpContext{}));
  at::Tensor logp =
      TokenLogProbs(logits, tok.narrow(1, 1, max_len - 1), 1.0, nullptr);
  return -(logp * target_mask.to(logp.device())).sum() / batch.tokens;
}

Result<PpoWorker::SftBatch> PpoWorker::DrawSftBatch(int step) {
  const int batch_size = config_.trainer.sft_batch_size;
  SftBatch batch;
  for (int i = 0; i < batch_size; ++i) {
    HY_ASSIGN_OR_RETURN(
        Demonstration d,
        source_->Demonstrate(static_cast<uint64_t>(step) * batch_size +
                             static_cast<uint64_t>(i)));
    std::vector<int> seq = d.prompt;
    seq.insert(seq.end(), d.response.begin(), d.response.end());
    batch.seqs.push_back(std::move(seq));
    batch.prompt_lens.push_back(static_cast<int64_t>(d.prompt.size()));
    batch.max_len = std::max<int64_t>(batch.max_len, batch.seqs.back().size());
    batch.tokens += static_cast<double>(d.response.size());
  }
  return batch;
}

Status PpoWorker::LogSftLoss(int step, Clock::time_point start,
                             double* loss_window) {
  const TrainerSection& tc = config_.trainer;
  HY_ASSIGN_OR_RETURN(auto sum, comm_->SumAcrossRanks({*loss_window}));
  const int window = (step % 20) + 1;
  Log("sft step " + std::to_string(step + 1) + "/" +
      std::to_string(tc.sft_steps) + " loss " +
      std::to_string(sum[0] / window) + " (" +
      std::to_string(static_cast<int>(
          std::chrono::duration<double>(Clock::now() - start).count())) +
      " s)");
  *loss_window = 0;
  return Status::OK();
}

Status PpoWorker::SftWarmup() {
  const TrainerSection& tc = config_.trainer;
  if (tc.sft_steps <= 0) return Status::OK();
  OptimConfig optim = config_.actor.optim;
  optim.lr = tc.sft_lr;
  const auto start = Clock::now();
  double loss_window = 0;
  for (int step = 0; step < tc.sft_steps; ++step) {
    // A stop (Ctrl-C) during the warm-up ends it: the run then stops
    // before its first iteration, having trained nothing worth saving.
    HY_ASSIGN_OR_RETURN(const int stop, AgreeToStop());
    if (stop != 0) {
      early_stop_ = stop;
      Log("sft: stopped at step " + std::to_string(step) + " of " +
          std::to_string(tc.sft_steps) + " (signal " + std::to_string(stop) +
          ")");
      return Status::OK();
    }
    HY_ASSIGN_OR_RETURN(const SftBatch batch, DrawSftBatch(step));
    int64_t lo, hi;
    Split(tc.sft_batch_size, &lo, &hi);
    HY_ASSIGN_OR_RETURN(auto pass, BeginPass(actor_.get(), true));
    if (hi > lo) {
      HY_ASSIGN_OR_RETURN(at::Tensor loss, SftLoss(*pass, batch, lo, hi));
      HY_RETURN_IF_ERROR(pass->Backward(loss));
      loss_window += loss.item<double>();
    } else {
      HY_RETURN_IF_ERROR(pass->Idle());
    }
    HY_RETURN_IF_ERROR(ApplyGradient(actor_.get(), pass.get(), optim).status());
    if ((step + 1) % 20 == 0 || step + 1 == tc.sft_steps) {
      HY_RETURN_IF_ERROR(LogSftLoss(step, start, &loss_window));
    }
  }
  actor_->ResetOptimizer();
  return Status::OK();
}

}  // namespace hy::trainer
