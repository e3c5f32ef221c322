// PpoWorker: reshard to the rollout layout, rollout, and the experience
// (old / reference log-probs, values, rewards, advantages).

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "hy/reshard/layout.h"
#include "hy/reshard/plan.h"
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

}  // namespace

void PpoWorker::Split(int64_t count, int64_t* lo, int64_t* hi) const {
  const int64_t r = comm_->rank();
  const int64_t n = comm_->world_size();
  *lo = count * r / n;
  *hi = count * (r + 1) / n;
}

Status PpoWorker::ReshardToRollout(IterationReport* report) {
  const int world = comm_->world_size();
  if (plan_ == nullptr) {
    HY_ASSIGN_OR_RETURN(reshard::Layout train,
                        reshard::Layout::Make(1, 1, 1, world));
    HY_ASSIGN_OR_RETURN(reshard::Layout rollout,
                        reshard::Layout::Make(comm_->tp_size(), 1,
                                              world / comm_->tp_size(), 1));
    reshard::Topology topology;
    topology.world_size = world;
    topology.ranks_per_node = world;
    HY_ASSIGN_OR_RETURN(
        reshard::TransferPlan plan,
        reshard::Plan(train, rollout, actor_->spec(), topology));
    plan_ = std::make_shared<const reshard::TransferPlan>(std::move(plan));
    if (comm_->on_cuda()) {
      // Device buffers, over NCCL (on one GPU: its copy and cast kernels).
      // Sparse delta is a host wire format: the full bf16 wire here.
      reshard::NcclExecutorOptions no;
      no.wire = reshard::WireFormat::kBf16;
      no.metrics = options_.metrics;
      no.direction = 0;
      HY_ASSIGN_OR_RETURN(nccl_executor_, reshard::NcclExecutor::Create(
                                              plan_, comm_->nccl(), no));
    } else {
      reshard::ExecutorOptions eo;
      eo.wire = reshard::WireFormat::kBf16;
      eo.sparse_delta = true;
      eo.metrics = options_.metrics;
      eo.direction = 0;
      executor_ =
          std::make_unique<reshard::Executor>(plan_, comm_->transport(), eo);
    }
    HY_RETURN_IF_ERROR(AllocateRolloutShards());
    HY_ASSIGN_OR_RETURN(rollout_weights_,
                        BindWeights(config_.model, ModelRole::kActor,
                                    [this](const std::string& name) {
                                      const int t = actor_->spec().Find(name);
                                      return t < 0 ? at::Tensor()
                                                   : rollout_shards_[t];
                                    }));
  }
  std::vector<ConstBytes> src;
  std::vector<MutableBytes> dst;
  for (int t = 0; t < actor_->num_tensors(); ++t) {
    at::Tensor local = actor_->LocalSlice(actor_->params(), t);
    src.emplace_back(static_cast<const uint8_t*>(local.data_ptr()),
                     static_cast<size_t>(local.numel() * 4));
    dst.emplace_back(static_cast<uint8_t*>(rollout_shards_[t].data_ptr()),
                     static_cast<size_t>(rollout_shards_[t].numel() * 2));
  }
  reshard::ReshardStats stats;
  HY_RETURN_IF_ERROR(nccl_executor_ != nullptr
                         ? nccl_executor_->Run(src, dst, &stats)
                         : executor_->Run(src, dst, &stats));
  ParkReshard();
  const double logical = static_cast<double>(
      stats.local_bytes + stats.same_node_bytes + stats.cross_node_bytes);
  double ms = stats.total_seconds * 1000.0;
  HY_ASSIGN_OR_RETURN(
      auto sums, comm_->SumAcrossRanks(
                     {static_cast<double>(stats.wire_bytes_sent), logical}));
  std::vector<uint8_t> mine(sizeof(double));
  std::memcpy(mine.data(), &ms, sizeof(double));
  HY_ASSIGN_OR_RETURN(auto all_ms, comm_->AllGatherBytes(mine));
  for (const auto& b : all_ms) {
    double x;
    std::memcpy(&x, b.data(), sizeof(double));
    ms = std::max(ms, x);
  }
  report->reshard_ms = ms;
  report->reshard_bytes = static_cast<int64_t>(sums[0]);
  report->reshard_logical_bytes = static_cast<int64_t>(sums[1]);
  return Status::OK();
}

Result<at::Tensor> PpoWorker::GenerateAll(const std::vector<Prompt>& items,
                                          int64_t prompt_len,
                                          uint64_t iteration,
                                          const RolloutConfig& rc) {
  const int64_t total = static_cast<int64_t>(items.size());
  // This dp group's share.
  const int64_t g = comm_->dp_rank();
  const int64_t groups = comm_->dp_size();
  const int64_t lo = total * g / groups;
  const int64_t hi = total * (g + 1) / groups;
  std::vector<Prompt> mine(items.begin() + lo, items.begin() + hi);
  std::vector<int64_t> ids;
  for (int64_t j = lo; j < hi; ++j) ids.push_back(j);
  TpContext tp{comm_->tp_size(), comm_->tp_rank(), comm_.get()};
  const TokenSpec& spec = source_->token_spec();
  HY_ASSIGN_OR_RETURN(
      at::Tensor responses,
      GenerateResponses(config_.model, rollout_weights_, tp,
                        BuildPrompts(mine, prompt_len, spec), ids,
                        config_.trainer.seed, iteration, rc, spec));
  // Every rank gets every group's responses (the TP leader's copy).
  std::vector<uint8_t> bytes;
  if (comm_->tp_rank() == 0) bytes = TensorBytes(responses);
  HY_ASSIGN_OR_RETURN(auto all, comm_->AllGatherBytes(bytes));
  std::vector<at::Tensor> parts;
  for (int p = 0; p < comm_->world_size(); p += comm_->tp_size()) {
    const int64_t rows =
        static_cast<int64_t>(all[p].size()) / 8 / rc.response_length;
    parts.push_back(
        at::from_blob(all[p].data(), {rows, rc.response_length}, at::kLong)
            .clone());
  }
  at::Tensor out = at::cat(parts, 0);
  if (out.size(0) != total) {
    return Status::Internal("rollout: gathered " + std::to_string(out.size(0)) +
                            " responses, expected " + std::to_string(total));
  }
  return out;
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
  if (on_vllm()) {
    HY_ASSIGN_OR_RETURN(
        exp->responses,
        GenerateOnEngines(exp->items, static_cast<uint64_t>(iteration), rc,
                          &exp->engine_logp, report));
  } else {
    HY_ASSIGN_OR_RETURN(exp->responses,
                        GenerateAll(exp->items, prompt_len,
                                    static_cast<uint64_t>(iteration), rc));
  }
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

Status PpoWorker::ComputeExperience(int64_t iteration, Experience* exp,
                                    IterationReport* report) {
  (void)iteration;
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

  // Scores, KL-penalised token rewards, advantages: same on every rank.
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
  const Shape2D shape{static_cast<size_t>(total), static_cast<size_t>(r_len)};
  Mask mask(shape.size());
  std::vector<float> mask_f = ToVector(exp->mask);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = mask_f[i] > 0;
  HY_ASSIGN_OR_RETURN(
      std::vector<float> kl,
      KlPenalty(ToVector(exp->old_logp), ToVector(exp->ref_logp),
                EstimatorOf(config_.algorithm.kl_penalty)));
  report->kl_coef = kl_->value();
  HY_ASSIGN_OR_RETURN(
      TokenRewards rewards,
      ComputeTokenLevelRewards(exp->scores, kl, mask, shape, kl_->value()));
  kl_->Update(rewards.mean_kl, total);
  if (gae) {
    GaeConfig gc;
    gc.gamma = config_.algorithm.gamma;
    gc.lam = config_.algorithm.lam;
    gc.whiten_advantages = config_.algorithm.norm_adv;
    HY_ASSIGN_OR_RETURN(
        GaeResult res,
        ComputeGae(rewards.rewards, ToVector(exp->values), mask, shape, gc));
    exp->advantages = FromVector(res.advantages, total, r_len);
    exp->returns = FromVector(res.returns, total, r_len);
  } else {
    std::vector<int64_t> groups;
    for (int64_t i = 0; i < total; ++i) groups.push_back(i / config_.rollout.n);
    std::vector<float> scores = exp->scores;
    HY_ASSIGN_OR_RETURN(std::vector<float> adv,
                        ComputeGrpoAdvantages(scores, groups, mask, shape, 1e-6,
                                              config_.algorithm.norm_adv));
    exp->advantages = FromVector(adv, total, r_len);
    exp->returns = exp->advantages.clone();
  }
  double reward_sum = 0;
  for (float s : exp->scores) reward_sum += s;
  const double tokens = exp->mask.sum().item<double>();
  report->reward_mean = reward_sum / static_cast<double>(total);
  report->exact_match = exact / static_cast<double>(total);
  report->response_length = tokens / static_cast<double>(total);
  report->kl =
      ((exp->old_logp - exp->ref_logp) * exp->mask).sum().item<double>() /
      std::max(tokens, 1.0);
  return Status::OK();
}

}  // namespace hy::trainer
