// PpoWorker: the rollout (on the rollout engine), and the experience
// (old / reference log-probs, values, rewards, advantages).

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "ppo.h"
#include "ppo_worker.h"

namespace hy::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

std::vector<uint8_t> TensorBytes(const at::Tensor& t) {
  at::Tensor c = t.cpu().contiguous();
  std::vector<uint8_t> out(static_cast<size_t>(c.numel() * c.element_size()));
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

KlEstimator EstimatorOf(const std::string& name) {
  if (name == "abs") return KlEstimator::kAbs;
  if (name == "mse" || name == "k2") return KlEstimator::kK2;
  if (name == "low_var_kl" || name == "k3") return KlEstimator::kK3;
  return KlEstimator::kK1;
}

std::vector<float> ToVector(const at::Tensor& t) {
  at::Tensor c = t.contiguous().to(at::kFloat);
  return std::vector<float>(c.data_ptr<float>(),
                            c.data_ptr<float>() + c.numel());
}

at::Tensor FromVector(const std::vector<float>& v, int64_t rows, int64_t cols) {
  return at::from_blob(const_cast<float*>(v.data()), {rows, cols}, at::kFloat)
      .clone();
}

// Which response tokens count: exp's mask [B, R] as one flag per token.
Mask TokenMask(const at::Tensor& mask, const Shape2D& shape) {
  Mask out(shape.size());
  std::vector<float> mask_f = ToVector(mask);
  for (size_t i = 0; i < out.size(); ++i) out[i] = mask_f[i] > 0;
  return out;
}

// The batch's reward mean, exact-match share (`exact` responses scored
// exact), mean response length and mean KL of the old policy to the
// reference per response token, into the report.
void ReportBatch(const Experience& exp, double exact,
                 IterationReport* report) {
  const int64_t total = exp.responses.size(0);
  double reward_sum = 0;
  for (float s : exp.scores) reward_sum += s;
  const double tokens = exp.mask.sum().item<double>();
  report->reward_mean = reward_sum / static_cast<double>(total);
  report->exact_match = exact / static_cast<double>(total);
  report->response_length = tokens / static_cast<double>(total);
  report->kl =
      ((exp.old_logp - exp.ref_logp) * exp.mask).sum().item<double>() /
      std::max(tokens, 1.0);
}

}  // namespace

void ReportLogprobMismatch(const Experience& exp, IterationReport* report) {
  if (!exp.engine_logp.defined() || !exp.old_logp.defined()) return;
  at::Tensor diff = (exp.old_logp.cpu() - exp.engine_logp).abs() * exp.mask;
  const double n = exp.mask.sum().item<double>();
  report->logprob_abs_diff_mean = n > 0 ? diff.sum().item<double>() / n : 0;
  report->logprob_abs_diff_max = diff.max().item<double>();
}

void PpoWorker::Split(int64_t count, int64_t* lo, int64_t* hi) const {
  const int64_t r = comm_->rank();
  const int64_t n = comm_->world_size();
  *lo = count * r / n;
  *hi = count * (r + 1) / n;
}

Status PpoWorker::Rollout(int64_t iteration, Experience* exp,
                          IterationReport* report) {
  const auto start = Clock::now();
  const RolloutConfig& rc = config_.rollout;
  const int64_t total = int64_t{rc.batch_size} * rc.n;
  const TokenSpec& spec = source_->token_spec();
  exp->items.clear();
  int64_t prompt_len = 0;
  for (int64_t j = 0; j < total; ++j) {
    HY_ASSIGN_OR_RETURN(
        Prompt p,
        source_->Get(data_position_ + static_cast<uint64_t>(j / rc.n)));
    prompt_len = std::max<int64_t>(prompt_len, p.tokens.size());
    exp->items.push_back(std::move(p));
  }
  HY_ASSIGN_OR_RETURN(
      exp->responses,
      rollout_->Generate(exp->items, prompt_len,
                         static_cast<uint64_t>(iteration), rc,
                         &exp->engine_logp, report));
  exp->prompts = BuildPrompts(exp->items, prompt_len, spec);
  exp->mask = ResponseMask(exp->responses, spec);
  report->rollout_ms = MsSince(start);
  return Status::OK();
}

Result<at::Tensor> PpoWorker::ScoreRows(const FsdpModel& model,
                                        const FsdpPass& pass,
                                        const Experience& exp, int64_t lo,
                                        int64_t hi, at::Tensor* entropy) {
  HY_ASSIGN_OR_RETURN(Weights w, pass.Bind());
  const int64_t n = hi - lo;
  PromptBatch prompts;
  prompts.prompt_len = exp.prompts.prompt_len;
  prompts.tokens = exp.prompts.tokens.narrow(0, lo, n);
  prompts.valid = exp.prompts.valid.narrow(0, lo, n);
  prompts.lengths = exp.prompts.lengths.narrow(0, lo, n);
  at::Tensor responses = exp.responses.narrow(0, lo, n);
  Sequences seq = BuildSequences(prompts, responses, exp.mask.narrow(0, lo, n));
  HY_ASSIGN_OR_RETURN(
      at::Tensor hidden,
      Trunk(config_.model, w, seq.tokens, seq.positions, seq.valid, TpContext{},
            nullptr, config_.trainer.gradient_checkpointing, pass.runner()));
  const int64_t r_len = responses.size(1);
  at::Tensor h = hidden.narrow(1, prompts.prompt_len - 1, r_len);
  if (model.role() == ModelRole::kCritic) return ValueHead(w, h);
  HY_ASSIGN_OR_RETURN(at::Tensor logits, LmHead(w, h, TpContext{}));
  return TokenLogProbs(logits, responses, config_.rollout.temperature, entropy);
}

Status PpoWorker::ScoreExperience(Experience* exp) {
  const int64_t total = exp->responses.size(0);
  const int64_t r_len = exp->responses.size(1);
  const bool gae = config_.algorithm.adv_estimator == AdvEstimator::kGae;
  int64_t lo, hi;
  Split(total, &lo, &hi);
  std::vector<at::Tensor> local;
  {
    at::NoGradGuard no_grad;
    std::vector<FsdpModel*> models = {actor_.get(), ref_.get()};
    if (gae) models.push_back(critic_.get());
    for (FsdpModel* m : models) {
      HY_ASSIGN_OR_RETURN(auto pass, BeginPass(m, false));
      HY_ASSIGN_OR_RETURN(at::Tensor out,
                          ScoreRows(*m, *pass, *exp, lo, hi, nullptr));
      local.push_back(out.cpu().contiguous());  // Experience: on the host.
    }
  }
  HY_ASSIGN_OR_RETURN(auto all,
                      comm_->AllGatherBytes(TensorBytes(at::cat(local, 1))));
  const int64_t k = static_cast<int64_t>(local.size());
  std::vector<at::Tensor> rows;
  for (auto& b : all) {
    const int64_t n = static_cast<int64_t>(b.size()) / 4 / (k * r_len);
    rows.push_back(at::from_blob(b.data(), {n, k * r_len}, at::kFloat).clone());
  }
  at::Tensor joined = at::cat(rows, 0);
  exp->old_logp = joined.narrow(1, 0, r_len).contiguous();
  exp->ref_logp = joined.narrow(1, r_len, r_len).contiguous();
  exp->values = gae ? joined.narrow(1, 2 * r_len, r_len).contiguous()
                    : at::zeros({total, r_len}, at::kFloat);
  return Status::OK();
}

Result<double> PpoWorker::ScoreRewards(Experience* exp,
                                       IterationReport* report) {
  exp->scores.clear();
  double exact = 0;
  const std::vector<std::vector<int>> responses =
      ResponseRows(exp->responses);
  const auto reward_start = std::chrono::steady_clock::now();
  HY_ASSIGN_OR_RETURN(std::vector<RewardScore> scores,
                      source_->ScoreAll(exp->items, responses));
  report->reward_ms = MsSince(reward_start);
  double correct[2] = {0, 0}, formatted[2] = {0, 0};  // {yes, said}
  for (const RewardScore& s : scores) {
    exact += source_->IsExact(s.score) ? 1 : 0;
    exp->scores.push_back(static_cast<float>(s.score));
    if (s.correct) correct[0] += *s.correct, correct[1] += 1;
    if (s.formatted) formatted[0] += *s.formatted, formatted[1] += 1;
  }
  if (correct[1] > 0) report->correct_rate = correct[0] / correct[1];
  if (formatted[1] > 0) report->format_rate = formatted[0] / formatted[1];
  return exact;
}

Result<TokenRewards> PpoWorker::PenalisedRewards(const Experience& exp,
                                                 const Mask& mask,
                                                 const Shape2D& shape,
                                                 IterationReport* report) {
  HY_ASSIGN_OR_RETURN(
      std::vector<float> kl,
      KlPenalty(ToVector(exp.old_logp), ToVector(exp.ref_logp),
                EstimatorOf(config_.algorithm.kl_penalty)));
  report->kl_coef = kl_->value();
  HY_ASSIGN_OR_RETURN(
      TokenRewards rewards,
      ComputeTokenLevelRewards(exp.scores, kl, mask, shape, kl_->value()));
  kl_->Update(rewards.mean_kl, exp.responses.size(0));
  return rewards;
}

Status PpoWorker::ComputeAdvantages(const std::vector<float>& token_rewards,
                                    const Mask& mask, const Shape2D& shape,
                                    Experience* exp) {
  const int64_t total = exp->responses.size(0);
  const int64_t r_len = exp->responses.size(1);
  if (config_.algorithm.adv_estimator == AdvEstimator::kGae) {
    GaeConfig gc;
    gc.gamma = config_.algorithm.gamma;
    gc.lam = config_.algorithm.lam;
    gc.whiten_advantages = config_.algorithm.norm_adv;
    HY_ASSIGN_OR_RETURN(
        GaeResult res,
        ComputeGae(token_rewards, ToVector(exp->values), mask, shape, gc));
    exp->advantages = FromVector(res.advantages, total, r_len);
    exp->returns = FromVector(res.returns, total, r_len);
    return Status::OK();
  }
  std::vector<int64_t> groups;
  for (int64_t i = 0; i < total; ++i) groups.push_back(i / config_.rollout.n);
  std::vector<float> scores = exp->scores;
  HY_ASSIGN_OR_RETURN(std::vector<float> adv,
                      ComputeGrpoAdvantages(scores, groups, mask, shape, 1e-6,
                                            config_.algorithm.norm_adv));
  exp->advantages = FromVector(adv, total, r_len);
  exp->returns = exp->advantages.clone();
  return Status::OK();
}

Status PpoWorker::ComputeExperience(int64_t iteration, Experience* exp,
                                    IterationReport* report) {
  (void)iteration;
  HY_RETURN_IF_ERROR(ScoreExperience(exp));
  // Scores, KL-penalised token rewards, advantages: same on every rank.
  HY_ASSIGN_OR_RETURN(const double exact, ScoreRewards(exp, report));
  const Shape2D shape{static_cast<size_t>(exp->responses.size(0)),
                      static_cast<size_t>(exp->responses.size(1))};
  const Mask mask = TokenMask(exp->mask, shape);
  HY_ASSIGN_OR_RETURN(TokenRewards rewards,
                      PenalisedRewards(*exp, mask, shape, report));
  HY_RETURN_IF_ERROR(ComputeAdvantages(rewards.rewards, mask, shape, exp));
  ReportBatch(*exp, exact, report);
  return Status::OK();
}

}  // namespace hy::trainer
