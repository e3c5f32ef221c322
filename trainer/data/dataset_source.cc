// PromptSource over a JSONL dataset, a Hugging Face tokenizer and a rule
// reward (see prompt_source.h: MakeDatasetSource).

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "hy/trainer/data/data_cursor.h"
#include "hy/trainer/data/prompt_data.h"
#include "hy/trainer/data/prompt_source.h"
#include "hy/trainer/data/reward.h"
#include "hy/trainer/data/special_tokens.h"
#include "hy/trainer/tokenizer/chat_template.h"
#include "hy/trainer/tokenizer/tokenizer.h"

namespace hy::trainer {
namespace {

// The SFT stream's order: a different permutation of the same records.
constexpr uint64_t kSftSeedSalt = 0x5346'5453'5452'4d31ull;  // "SFTSTRM1"

class DatasetSource : public PromptSource {
 public:
  Status Init(const DataConfig& data, const std::string& model_dir,
              const std::vector<int>& model_eos, uint64_t seed) {
    data_ = data;
    seed_ = seed;
    HY_ASSIGN_OR_RETURN(dataset_, PromptDataset::Load(data.train_files));
    const std::string tok_path =
        data.tokenizer.empty() ? model_dir : data.tokenizer;
    if (tok_path.empty()) {
      return Status::InvalidArgument(
          "data.tokenizer: empty, and no model.path to take tokenizer.json "
          "from");
    }
    HY_ASSIGN_OR_RETURN(tokenizer_, Tokenizer::Load(tok_path));
    HY_ASSIGN_OR_RETURN(std::vector<std::string> texts,
                        RenderPrompts(tok_path));
    HY_ASSIGN_OR_RETURN(spec_,
                        SpecialTokensFor(*tokenizer_, turn_end_, model_eos));
    tokenizer_path_ = tok_path;
    RewardOptions ro;
    ro.require_eos = data.require_eos;
    ro.python_file = data.reward_file;
    ro.python_function = data.reward_function;
    HY_ASSIGN_OR_RETURN(reward_, MakeReward(data.reward, ro));
    return EncodePrompts(texts);
  }

  const TokenSpec& token_spec() const override { return spec_; }

  uint64_t num_prompts() const override { return dataset_->size(); }

  Result<Prompt> Get(uint64_t position) const override {
    Prompt p;
    p.position = position;
    p.tokens = encoded_[Record(position, seed_)];
    return p;
  }

  Result<std::vector<RewardScore>> ScoreAll(
      const std::vector<Prompt>& prompts,
      const std::vector<std::vector<int>>& responses) const override {
    std::vector<std::string> texts(prompts.size());
    std::vector<std::string> prompt_texts(prompts.size());
    std::vector<RewardInput> inputs(prompts.size());
    std::vector<size_t> records(prompts.size());
    // An undecodable response scores 0 and is neither right nor in form.
    std::vector<RewardScore> scores(prompts.size());
    std::vector<size_t> scored;  // Decodable responses, scored below.
    for (size_t i = 0; i < prompts.size(); ++i) {
      records[i] = Record(prompts[i].position, seed_);
      const PromptRecord& r = dataset_->record(records[i]);
      const std::vector<int>& response = responses[i];
      auto end = std::find_if(response.begin(), response.end(),
                              [this](int id) { return spec_.IsEos(id); });
      auto text = tokenizer_->Decode(std::vector<int32_t>(response.begin(), end),
                                     /*skip_special_tokens=*/true);
      if (!text.ok()) continue;  // Ids outside the tokenizer: scores 0.
      texts[i] = std::move(*text);
      RewardInput& in = inputs[i];
      in.ended_with_eos = end != response.end();
      in.answer = r.answer;
      in.fields = &r.fields;
      in.index = static_cast<int64_t>(records[i]);
      in.source = r.source;
      if (reward_->name() == "python") {  // Only it reads the prompt.
        prompt_texts[i] = Render(encoded_[records[i]]);
        in.prompt = prompt_texts[i];
      }
      scored.push_back(i);
    }
    std::vector<RewardInput> batch;
    for (size_t i : scored) {
      inputs[i].response = texts[i];
      batch.push_back(inputs[i]);
    }
    HY_ASSIGN_OR_RETURN(std::vector<RewardScore> got,
                        reward_->ScoreBatch(batch));
    for (size_t k = 0; k < scored.size(); ++k) scores[scored[k]] = got[k];
    return scores;
  }

  Result<Demonstration> Demonstrate(uint64_t index) const override {
    const size_t i = Record(index, seed_ ^ kSftSeedSalt);
    const PromptRecord& r = dataset_->record(i);
    if (r.answer.empty()) {
      return Status::InvalidArgument(r.source +
                                     ": no \"answer\" to warm up on (set "
                                     "trainer.sft_steps: 0)");
    }
    Demonstration d;
    d.prompt = encoded_[i];
    HY_ASSIGN_OR_RETURN(auto ids, tokenizer_->Encode(r.answer));
    d.response.assign(ids.begin(), ids.end());
    d.response.push_back(spec_.eos.front());
    return d;
  }

  std::string Render(const std::vector<int>& ids) const override {
    auto text =
        tokenizer_->Decode(std::vector<int32_t>(ids.begin(), ids.end()));
    return text.ok() ? *text : "<undecodable>";
  }

  int max_prompt_tokens() const override { return max_prompt_tokens_; }

  int vocab_size() const { return tokenizer_->vocab_size(); }

  std::string tokenizer_path() const override { return tokenizer_path_; }

 private:
  size_t Record(uint64_t position, uint64_t seed) const {
    const uint64_t size = dataset_->size();
    const uint64_t epoch = position / size;
    std::lock_guard<std::mutex> lock(mu_);
    auto& cache = seed == seed_ ? train_order_ : sft_order_;
    if (cache.first != epoch || cache.second.empty()) {
      cache = {epoch, EpochOrder(size, seed, epoch, data_.shuffle)};
    }
    return static_cast<size_t>(cache.second[position % size]);
  }

  // The text of every record's prompt: a string as is, chat messages as
  // the directory's chat template renders them (all in one run of the
  // renderer, chat_template.h). Sets turn_end_ when there is a template.
  Result<std::vector<std::string>> RenderPrompts(const std::string& tok_path) {
    std::vector<std::string> texts(dataset_->size());
    std::vector<ChatRequest> requests;
    std::vector<size_t> chat_records;
    for (size_t i = 0; i < dataset_->size(); ++i) {
      const ChatPrompt& p = dataset_->record(i).prompt;
      if (p.is_chat) {
        requests.push_back(
            ChatRequest{p.messages, true, dataset_->record(i).source});
        chat_records.push_back(i);
      } else {
        texts[i] = p.text;
      }
    }
    auto t = ChatTemplate::Load(TokenizerDir(tok_path));
    if (t.status().IsNotFound()) {
      if (chat_records.empty()) return texts;
      return Status::InvalidArgument(
          dataset_->record(chat_records.front()).source +
          ": chat messages, and " + std::string(t.status().message()));
    }
    if (!t.ok()) return t.status();
    HY_ASSIGN_OR_RETURN(std::string variables, TemplateVariables());
    HY_ASSIGN_OR_RETURN(RenderedChats rendered,
                        t->Render(requests, variables));
    turn_end_ = rendered.turn_end;
    for (size_t k = 0; k < chat_records.size(); ++k) {
      texts[chat_records[k]] = std::move(rendered.texts[k]);
    }
    return texts;
  }

  // data.chat_template_kwargs with enable_thinking set from
  // data.enable_thinking.
  Result<std::string> TemplateVariables() const {
    nlohmann::json v = nlohmann::json::parse(data_.chat_template_kwargs,
                                             nullptr, false);
    if (v.is_discarded() || !v.is_object()) {
      return Status::InvalidArgument(
          "data.chat_template_kwargs: not a JSON object: " +
          data_.chat_template_kwargs);
    }
    if (!v.contains("enable_thinking")) {
      v["enable_thinking"] = data_.enable_thinking;
    }
    return v.dump();
  }

  Status EncodePrompts(const std::vector<std::string>& texts) {
    encoded_.resize(dataset_->size());
    for (size_t i = 0; i < dataset_->size(); ++i) {
      const PromptRecord& r = dataset_->record(i);
      // A string prompt gets the tokenizer's template (Llama 3's BOS); a
      // rendered chat already holds its special tokens (transformers'
      // apply_chat_template(tokenize=True) adds none either).
      auto ids = tokenizer_->Encode(texts[i], !r.prompt.is_chat);
      if (!ids.ok()) {
        return Status::InvalidArgument(r.source + ": " +
                                       std::string(ids.status().message()));
      }
      if (ids->empty() ||
          static_cast<int>(ids->size()) > data_.max_prompt_length) {
        return Status::InvalidArgument(r.source + ": the prompt is " +
                                       std::to_string(ids->size()) +
                                       " tokens; data.max_prompt_length is " +
                                       std::to_string(data_.max_prompt_length));
      }
      encoded_[i].assign(ids->begin(), ids->end());
      max_prompt_tokens_ =
          std::max(max_prompt_tokens_, static_cast<int>(ids->size()));
    }
    return Status::OK();
  }

  DataConfig data_;
  uint64_t seed_ = 0;
  std::optional<PromptDataset> dataset_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<std::string> turn_end_;  // After an assistant turn.
  std::unique_ptr<RewardFunction> reward_;
  TokenSpec spec_;
  std::string tokenizer_path_;
  std::vector<std::vector<int>> encoded_;  // Per record.
  int max_prompt_tokens_ = 0;
  mutable std::mutex mu_;
  mutable std::pair<uint64_t, std::vector<uint64_t>> train_order_, sft_order_;
};

}  // namespace

Result<std::unique_ptr<PromptSource>> MakeDatasetSource(
    const DataConfig& data, const std::string& model_dir,
    const std::vector<int>& model_eos, uint64_t seed, int model_vocab_size) {
  auto source = std::make_unique<DatasetSource>();
  HY_RETURN_IF_ERROR(source->Init(data, model_dir, model_eos, seed));
  if (source->vocab_size() > model_vocab_size) {
    return Status::InvalidArgument(
        "model.vocab_size " + std::to_string(model_vocab_size) +
        " is smaller than the tokenizer's " +
        std::to_string(source->vocab_size()) + " ids");
  }
  return std::unique_ptr<PromptSource>(std::move(source));
}

}  // namespace hy::trainer
