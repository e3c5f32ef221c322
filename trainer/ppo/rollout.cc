#include "rollout.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace hy::trainer {

PromptBatch BuildPrompts(const std::vector<Prompt>& prompts, int64_t prompt_len,
                         const TokenSpec& spec) {
  const int64_t b = static_cast<int64_t>(prompts.size());
  PromptBatch out;
  out.prompt_len = prompt_len;
  out.tokens = at::full({b, prompt_len}, spec.pad, at::kLong);
  out.valid = at::zeros({b, prompt_len}, at::kBool);
  out.lengths = at::zeros({b}, at::kLong);
  auto tok = out.tokens.accessor<int64_t, 2>();
  auto val = out.valid.accessor<bool, 2>();
  for (int64_t i = 0; i < b; ++i) {
    const auto& p = prompts[i].tokens;
    const int64_t n = static_cast<int64_t>(p.size());
    for (int64_t j = 0; j < n; ++j) {
      tok[i][prompt_len - n + j] = p[j];
      val[i][prompt_len - n + j] = true;
    }
    out.lengths[i] = n;
  }
  return out;
}

int SampleToken(const float* logits, int64_t vocab, double temperature,
                int top_k, uint64_t draw_seed) {
  if (temperature <= 0) {
    return static_cast<int>(std::max_element(logits, logits + vocab) - logits);
  }
  thread_local std::vector<double> p;
  p.resize(static_cast<size_t>(vocab));
  double top = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) {
    p[i] = static_cast<double>(logits[i]) / temperature;
    top = std::max(top, p[i]);
  }
  double cutoff = -INFINITY;  // Logits below it are dropped (top-k).
  int64_t ties = vocab;       // Logits equal to the cutoff that stay.
  if (top_k > 0 && top_k < vocab) {
    thread_local std::vector<double> sorted;
    sorted.assign(p.begin(), p.end());
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(),
                     std::greater<double>());
    cutoff = sorted[top_k - 1];
    ties = top_k - std::count_if(p.begin(), p.end(),
                                 [cutoff](double z) { return z > cutoff; });
  }
  double total = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    bool keep = p[i] > cutoff;
    if (p[i] == cutoff && ties > 0) {  // Ties keep the lowest ids.
      keep = true;
      --ties;
    }
    p[i] = keep ? std::exp(p[i] - top) : 0.0;
    total += p[i];
  }
  const double u =
      static_cast<double>(draw_seed >> 11) * (1.0 / 9007199254740992.0);
  double target = u * total;
  int last = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (p[i] == 0) continue;
    last = static_cast<int>(i);
    if (target < p[i]) return last;
    target -= p[i];
  }
  return last;
}

Result<at::Tensor> GenerateResponses(const ModelConfig& config,
                                     const Weights& w, const TpContext& tp,
                                     const PromptBatch& prompts,
                                     const std::vector<int64_t>& sample_ids,
                                     uint64_t seed, uint64_t iteration,
                                     const RolloutConfig& rollout,
                                     const TokenSpec& spec) {
  at::NoGradGuard no_grad;
  const int64_t b = prompts.tokens.size(0);
  const int64_t p_len = prompts.prompt_len;
  const int64_t r_len = rollout.response_length;
  at::Tensor responses = at::full({b, r_len}, spec.pad, at::kLong);
  if (b == 0) return responses;
  // The weights' device runs the model; tokens and sampling stay here.
  KvCache cache = MakeKvCache(config, tp.tp, b, p_len + r_len, w.norm.device());
  at::Tensor positions =
      (prompts.valid.to(at::kLong).cumsum(1) - 1).clamp_min(0);
  at::Tensor key_valid = at::ones({b, p_len + r_len}, at::kBool);
  key_valid.narrow(1, 0, p_len).copy_(prompts.valid);
  std::vector<bool> done(b, false);
  at::Tensor input = prompts.tokens;
  at::Tensor pos = positions;
  auto out = responses.accessor<int64_t, 2>();
  for (int64_t t = 0; t < r_len; ++t) {
    HY_ASSIGN_OR_RETURN(
        at::Tensor hidden,
        Trunk(config, w, input, pos,
              key_valid.narrow(1, 0, cache.length + input.size(1)), tp,
              &cache));
    HY_ASSIGN_OR_RETURN(at::Tensor logits,
                        LmHead(w, hidden.narrow(1, hidden.size(1) - 1, 1), tp));
    logits = logits.reshape({b, -1}).cpu().contiguous();
    const float* lp = logits.data_ptr<float>();
    const int64_t vocab = logits.size(1);
    at::Tensor next = at::full({b, 1}, spec.pad, at::kLong);
    for (int64_t i = 0; i < b; ++i) {
      if (done[i]) continue;
      const int tok = SampleToken(
          lp + i * vocab, vocab, rollout.temperature, rollout.top_k,
          SamplingSeed(seed, iteration, static_cast<uint64_t>(sample_ids[i]),
                       static_cast<uint64_t>(t)));
      out[i][t] = tok;
      next[i][0] = tok;
      if (spec.IsEos(tok)) done[i] = true;
    }
    input = next;
    pos = (prompts.lengths + t).unsqueeze(1);
  }
  return responses;
}

std::vector<std::vector<int>> ResponseRows(const at::Tensor& responses) {
  const at::Tensor r = responses.to(at::kLong).contiguous();
  auto a = r.accessor<int64_t, 2>();
  std::vector<std::vector<int>> rows(static_cast<size_t>(r.size(0)));
  for (int64_t i = 0; i < r.size(0); ++i) {
    rows[i].resize(static_cast<size_t>(r.size(1)));
    for (int64_t t = 0; t < r.size(1); ++t) {
      rows[i][t] = static_cast<int>(a[i][t]);
    }
  }
  return rows;
}

at::Tensor ResponseMask(const at::Tensor& responses, const TokenSpec& spec) {
  // Tokens up to and including the first EOS: an EOS seen strictly before.
  at::Tensor eos = at::zeros_like(responses);
  for (int id : spec.eos) eos += (responses == id).to(at::kLong);
  at::Tensor before = eos.cumsum(1) - eos;
  return (before == 0).to(at::kFloat);
}

Sequences BuildSequences(const PromptBatch& prompts,
                         const at::Tensor& responses,
                         const at::Tensor& response_mask) {
  Sequences s;
  s.tokens = at::cat({prompts.tokens, responses}, 1);
  s.valid = at::cat({prompts.valid, response_mask.to(at::kBool)}, 1);
  s.positions = (s.valid.to(at::kLong).cumsum(1) - 1).clamp_min(0);
  return s;
}

}  // namespace hy::trainer
