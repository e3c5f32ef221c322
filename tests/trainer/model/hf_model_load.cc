#include "hf_model_load.h"

#include <algorithm>

#include "hy/trainer/hf/hf_model.h"
#include "rollout.h"

namespace hy::trainer {
namespace {

// Pad is a real token (0) so that a pad that leaked into attention would
// change the answer; no EOS, so every row generates all its tokens.
TokenSpec Spec() {
  TokenSpec spec;
  spec.pad = 0;
  spec.eos.clear();
  return spec;
}

PromptBatch Batch(const std::vector<std::vector<int>>& prompts) {
  std::vector<Prompt> p(prompts.size());
  size_t longest = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    p[i].tokens = prompts[i];
    longest = std::max(longest, prompts[i].size());
  }
  return BuildPrompts(p, static_cast<int64_t>(longest), Spec());
}

}  // namespace

Result<HfModel> LoadHfModel(const std::string& dir) {
  HfModel m;
  HY_ASSIGN_OR_RETURN(m.config, ReadHfConfig(dir));
  HY_ASSIGN_OR_RETURN(auto weights, HfWeights::Open(dir, m.config));
  m.files = weights->files().size();
  for (const TensorMeta& t : ModelTensors(m.config, ModelRole::kActor)) {
    at::Tensor x = at::empty(t.shape, at::kFloat);
    HY_RETURN_IF_ERROR(
        weights->ReadF32(t.name, 0, x.numel(), x.data_ptr<float>()));
    m.tensors[t.name] = x;
  }
  HY_ASSIGN_OR_RETURN(
      m.weights,
      BindWeights(m.config, ModelRole::kActor, [&](const std::string& name) {
        auto it = m.tensors.find(name);
        return it == m.tensors.end() ? at::Tensor() : it->second;
      }));
  return m;
}

Result<at::Tensor> PaddedLogits(const HfModel& m,
                                const std::vector<std::vector<int>>& prompts) {
  const PromptBatch batch = Batch(prompts);
  // The sequences the training-side forward reads, with no response yet.
  const at::Tensor none = at::empty({batch.tokens.size(0), 0}, at::kLong);
  const Sequences s = BuildSequences(batch, none, none.to(at::kFloat));
  HY_ASSIGN_OR_RETURN(at::Tensor hidden,
                      Trunk(m.config, m.weights, s.tokens, s.positions, s.valid,
                            TpContext{}, nullptr));
  return LmHead(m.weights, hidden, TpContext{});
}

Result<std::vector<std::vector<int>>> GreedyContinuations(
    const HfModel& m, const std::vector<std::vector<int>>& prompts, int n) {
  RolloutConfig rollout;
  rollout.response_length = n;
  rollout.temperature = 0;  // Greedy.
  std::vector<int64_t> ids(prompts.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  HY_ASSIGN_OR_RETURN(at::Tensor out,
                      GenerateResponses(m.config, m.weights, TpContext{},
                                        Batch(prompts), ids, /*seed=*/1,
                                        /*iteration=*/0, rollout, Spec()));
  std::vector<std::vector<int>> tokens(prompts.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    for (int t = 0; t < n; ++t) {
      tokens[i].push_back(static_cast<int>(out[i][t].item<int64_t>()));
    }
  }
  return tokens;
}

}  // namespace hy::trainer
