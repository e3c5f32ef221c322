// Rollout: prompts as tensors, generation with the (TP-sharded) actor and a
// KV cache, and the sequences the training-side forward passes read.
//
// Layout of a sequence: the prompt left-padded to P tokens (the source's
// pad id, invalid), then R response tokens; after the first EOS (any of
// the source's EOS ids) the response holds pad and is masked out. Positions
// count valid tokens (0 for the first prompt token), so padding never shifts a
// sample's rotary positions, and generation and the training forward see each
// sample identically whatever the batch.
//
// Sampling is reproducible anywhere: token t of global sample j draws its
// uniform from SamplingSeed(seed, iteration, j, t) and inverts the CDF of
// softmax(logits / temperature) over the whole vocabulary (top-k optional),
// computed in double, so every rank of a TP group picks the same token and
// a resumed run on another world size draws the same numbers.
//
// Internal to hy_trainer_ppo. Thread-safety: pure functions.

#ifndef HY_TRAINER_PPO_ROLLOUT_H_
#define HY_TRAINER_PPO_ROLLOUT_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "hy/common/result.h"
#include "hy/trainer/config/config.h"
#include "hy/trainer/data/prompt_source.h"
#include "hy/trainer/model/model.h"

namespace hy::trainer {

struct PromptBatch {
  int64_t prompt_len = 0;  // P
  at::Tensor tokens;       // [b, P] int64, left-padded with PAD
  at::Tensor valid;        // [b, P] bool
  at::Tensor lengths;      // [b] int64 valid prompt tokens
};

// REQUIRES: every prompt has at most prompt_len tokens.
PromptBatch BuildPrompts(const std::vector<Prompt>& prompts, int64_t prompt_len,
                         const TokenSpec& spec);

// Draws one token id in [0, vocab) from `logits` (vocab values, the
// model's whole vocabulary): the inverse CDF of softmax(logits /
// temperature) at the uniform of draw_seed, in double; with top_k > 0 only
// the top_k largest logits (ties: lowest ids) keep their mass. With
// temperature <= 0 it is greedy: the largest logit (ties: the lowest id).
int SampleToken(const float* logits, int64_t vocab, double temperature,
                int top_k, uint64_t draw_seed);

// Generates rollout.response_length tokens per row with the actor weights
// `w` under `tp`. sample_ids are the rows' global sample indices. Returns
// [b, R] int64 (PAD after EOS), or a comm error.
Result<at::Tensor> GenerateResponses(const ModelConfig& config,
                                     const Weights& w, const TpContext& tp,
                                     const PromptBatch& prompts,
                                     const std::vector<int64_t>& sample_ids,
                                     uint64_t seed, uint64_t iteration,
                                     const RolloutConfig& rollout,
                                     const TokenSpec& spec);

// [b, R] f32: 1 up to and including the first EOS, else 0.
at::Tensor ResponseMask(const at::Tensor& responses, const TokenSpec& spec);

// The rows of `responses` ([b, R] int64) as id lists, for scoring
// (PromptSource::ScoreAll).
std::vector<std::vector<int>> ResponseRows(const at::Tensor& responses);

struct Sequences {
  at::Tensor tokens;     // [b, P + R] int64
  at::Tensor positions;  // [b, P + R] int64
  at::Tensor valid;      // [b, P + R] bool
};

Sequences BuildSequences(const PromptBatch& prompts,
                         const at::Tensor& responses,
                         const at::Tensor& response_mask);

}  // namespace hy::trainer

#endif  // HY_TRAINER_PPO_ROLLOUT_H_
