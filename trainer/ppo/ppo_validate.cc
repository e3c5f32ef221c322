// PpoWorker: validation on held-out prompts (data.val_files), decoded
// greedily by hy's decoder (whatever rollout.engine is) and scored by
// data.reward.

#include <algorithm>

#include "ppo_worker.h"

namespace hy::trainer {
namespace {

// Prompts decoded per Generate call: bounds the rollout batch.
constexpr uint64_t kValChunk = 256;

}  // namespace

Result<ValidationReport> PpoWorker::Validate(int64_t iteration) {
  ValidationReport out;
  out.iteration = iteration;
  if (val_source_ == nullptr) return out;
  IterationReport ignored;
  RolloutEngine& decoder = Decoder();
  HY_RETURN_IF_ERROR(decoder.LoadWeights(iteration, &ignored));
  RolloutConfig rc = config_.rollout;
  rc.temperature = 0;  // Greedy: SampleToken takes the largest logit.
  rc.top_k = 0;
  const uint64_t count = val_source_->num_prompts();
  double reward = 0, exact = 0;
  for (uint64_t begin = 0; begin < count; begin += kValChunk) {
    const uint64_t end = std::min(count, begin + kValChunk);
    std::vector<Prompt> items;
    int64_t prompt_len = 0;
    for (uint64_t p = begin; p < end; ++p) {
      HY_ASSIGN_OR_RETURN(Prompt prompt, val_source_->Get(p));
      prompt_len = std::max<int64_t>(prompt_len, prompt.tokens.size());
      items.push_back(std::move(prompt));
    }
    HY_ASSIGN_OR_RETURN(
        at::Tensor responses,
        decoder.Generate(items, prompt_len, static_cast<uint64_t>(iteration),
                         rc, /*engine_logp=*/nullptr, &ignored));
    HY_ASSIGN_OR_RETURN(std::vector<RewardScore> scores,
                        val_source_->ScoreAll(items, ResponseRows(responses)));
    for (const RewardScore& s : scores) {
      reward += s.score;
      exact += val_source_->IsExact(s.score) ? 1 : 0;
    }
  }
  out.prompts = static_cast<int64_t>(count);
  out.reward_mean = count > 0 ? reward / static_cast<double>(count) : 0;
  out.exact_match = count > 0 ? exact / static_cast<double>(count) : 0;
  if (options_.on_validation) options_.on_validation(out);
  return out;
}

RolloutEngine& PpoWorker::Decoder() {
  return decoder_ != nullptr ? *decoder_ : *rollout_;
}

}  // namespace hy::trainer
