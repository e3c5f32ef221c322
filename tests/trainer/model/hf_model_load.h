// hy's side of hf_model_test.cc: a Hugging Face directory loaded as the
// trainer loads it (ReadHfConfig, HfWeights, BindWeights) and run as the
// rollout runs it: prompts left-padded into one batch (rollout.h), the
// training-side forward over them and greedy generation with a KV cache.

#ifndef HY_TESTS_TRAINER_TORCH_HF_MODEL_LOAD_H_
#define HY_TESTS_TRAINER_TORCH_HF_MODEL_LOAD_H_

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/trainer/config/model_config.h"
#include "hy/trainer/model/model.h"

namespace hy::trainer {

struct HfModel {
  ModelConfig config;
  std::map<std::string, at::Tensor> tensors;  // f32, by Hugging Face name.
  Weights weights;                            // Bound to `tensors`.
  size_t files = 0;                           // Weight files read.
};

// Reads config.json and every actor tensor of `dir`; their errors.
Result<HfModel> LoadHfModel(const std::string& dir);

// Logits [B, P, vocab] of the prompts left-padded to the longest (P) and
// run as one batch, positions counting each prompt's own tokens.
Result<at::Tensor> PaddedLogits(const HfModel& m,
                                const std::vector<std::vector<int>>& prompts);

// `n` greedy tokens per prompt from GenerateResponses (no EOS stops it).
Result<std::vector<std::vector<int>>> GreedyContinuations(
    const HfModel& m, const std::vector<std::vector<int>>& prompts, int n);

}  // namespace hy::trainer

#endif  // HY_TESTS_TRAINER_TORCH_HF_MODEL_LOAD_H_
