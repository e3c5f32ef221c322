// The built-in digit tasks as a PromptSource (see prompt_source.h).

#include <algorithm>

#include "hy/trainer/data/prompt_source.h"

namespace hy::trainer {

bool TokenSpec::IsEos(int64_t id) const {
  return std::find(eos.begin(), eos.end(), id) != eos.end();
}

namespace {

class TaskSource : public PromptSource {
 public:
  TaskSource(const TaskConfig& task, uint64_t seed, int batch_size,
             int sft_batch_size)
      : task_(task),
        seed_(seed),
        batch_(static_cast<uint64_t>(std::max(batch_size, 1))),
        sft_batch_(static_cast<uint64_t>(std::max(sft_batch_size, 1))) {}

  const TokenSpec& token_spec() const override { return spec_; }

  Result<Prompt> Get(uint64_t position) const override {
    Prompt p;
    p.position = position;
    p.tokens = At(position).prompt;
    return p;
  }

  Result<std::vector<RewardScore>> ScoreAll(
      const std::vector<Prompt>& prompts,
      const std::vector<std::vector<int>>& responses) const override {
    std::vector<RewardScore> scores(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      scores[i].score = Reward(At(prompts[i].position), responses[i]);
      scores[i].correct = scores[i].score >= 1.0;
    }
    return scores;
  }

  Result<Demonstration> Demonstrate(uint64_t index) const override {
    const Sample s =
        Generate(task_, seed_, kSftIterationBase + index / sft_batch_,
                 index % sft_batch_);
    Demonstration d;
    d.prompt = s.prompt;
    d.response = s.answer;
    d.response.push_back(kEos);
    return d;
  }

  std::string Render(const std::vector<int>& ids) const override {
    return Detokenize(ids);
  }

  int max_prompt_tokens() const override { return MaxPromptTokens(task_); }

 private:
  Sample At(uint64_t position) const {
    return Generate(task_, seed_, position / batch_, position % batch_);
  }

  const TaskConfig task_;
  const uint64_t seed_;
  const uint64_t batch_;
  const uint64_t sft_batch_;
  const TokenSpec spec_;
};

}  // namespace

std::unique_ptr<PromptSource> MakeTaskSource(const TaskConfig& task,
                                             uint64_t seed, int batch_size,
                                             int sft_batch_size) {
  return std::make_unique<TaskSource>(task, seed, batch_size, sft_batch_size);
}

}  // namespace hy::trainer
