// Evaluate (see hy/trainer/ppo/evaluate.h): one process, the whole model, the
// rollout's decoding.

#include "hy/trainer/ppo/evaluate.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include "hy/checkpoint/checkpoint.h"
#include "hy/trainer/config/config.h"
#include "hy/trainer/data/prompt_source.h"
#include "hy/trainer/data/special_tokens.h"
#include "hy/trainer/hf/hf_model.h"
#include "hy/trainer/hf/run_tokens.h"
#include "hy/trainer/model/model.h"
#include "ppo.h"
#include "rollout.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;

// The model to decode and how the data around it was set up.
struct Loaded {
  std::string label;
  ModelConfig model;
  std::function<Status(const TensorMeta&, float*)> read;
  std::unique_ptr<checkpoint::CheckpointReader> reader;  // Store sources.
  std::unique_ptr<HfWeights> weights;                    // HF sources.
  DataConfig data;  // Tokenizer, reward, template options.
  std::vector<int> model_eos;
  std::optional<TokenSpec> recorded;  // The run's ids (store sources).
  int max_new_tokens = 64;
  bool bf16 = false;
};

Status LoadRun(const EvalOptions& o, Loaded* out) {
  HY_ASSIGN_OR_RETURN(out->reader,
                      checkpoint::CheckpointReader::Open(o.source, o.step));
  if (o.model != "actor" && o.model != "reference") {
    return Status::InvalidArgument("--model must be actor or reference, got " +
                                   o.model);
  }
  HY_ASSIGN_OR_RETURN(std::string yaml,
                      out->reader->ReadBlob("trainer.config"));
  HY_ASSIGN_OR_RETURN(TrainConfig config, ParseConfigYaml(yaml));
  HY_ASSIGN_OR_RETURN(RunTokens tokens, RunTokensOf(out->reader.get(), config));
  if (tokens.tokenizer_dir.empty()) {
    return Status::InvalidArgument(
        o.source +
        ": this run trained on the built-in task's own symbols, "
        "not a tokenizer: there is no text to evaluate it on");
  }
  const std::string dir =
      o.tokenizer.empty() ? tokens.tokenizer_dir : o.tokenizer;
  HY_RETURN_IF_ERROR(CheckTokenizerFiles(tokens, dir));
  out->label =
      o.source + " step " + std::to_string(out->reader->step()) + " " + o.model;
  out->model = config.model;
  out->data = config.data;
  out->data.tokenizer = dir;
  out->model_eos = tokens.spec.eos;
  out->recorded = tokens.spec;
  out->max_new_tokens = config.rollout.response_length;
  out->bf16 = true;  // The rollout's weights, as validation decodes.
  checkpoint::CheckpointReader* reader = out->reader.get();
  const std::string prefix = o.model + "/";
  out->read = [reader, prefix](const TensorMeta& m, float* dst) {
    const int64_t n = *m.NumElements();
    return reader->ReadRegion(prefix + m.name, {0, n},
                              MutableBytes(reinterpret_cast<uint8_t*>(dst),
                                           static_cast<size_t>(n) * 4));
  };
  return Status::OK();
}

Status LoadHf(const EvalOptions& o, Loaded* out) {
  std::string config_json;
  out->model.path = o.source;
  HY_RETURN_IF_ERROR(ResolveModelPath(&out->model, &config_json));
  HY_ASSIGN_OR_RETURN(out->weights, HfWeights::Open(o.source, out->model));
  out->label = o.source;
  out->data.tokenizer = o.tokenizer.empty() ? o.source : o.tokenizer;
  out->data.max_prompt_length = 1024;
  out->model_eos = HfModelEosIds(o.source, config_json);
  out->bf16 = out->model.torch_dtype == "bfloat16";
  HfWeights* weights = out->weights.get();
  out->read = [weights](const TensorMeta& m, float* dst) {
    return weights->ReadF32(m.name, 0, *m.NumElements(), dst);
  };
  return Status::OK();
}

Result<Weights> LoadWeights(const Loaded& l,
                            std::map<std::string, at::Tensor>* tensors) {
  for (const TensorMeta& m : ModelTensors(l.model, ModelRole::kActor)) {
    at::Tensor t = at::empty(m.shape, at::kFloat);
    HY_RETURN_IF_ERROR(l.read(m, t.data_ptr<float>()));
    (*tensors)[m.name] = l.bf16 ? t.to(at::kBFloat16) : t;
  }
  return BindWeights(l.model, ModelRole::kActor, [&](const std::string& n) {
    auto it = tensors->find(n);
    return it == tensors->end() ? at::Tensor() : it->second;
  });
}

// Log-probabilities [b, R] (f32) of `responses` under the model, each
// token given the prompt and the response before it: the forward the
// trainer scores its rollouts with (Trunk over prompt + response, LmHead,
// log softmax at temperature 1). Tokens after the first eos score 0.
Result<at::Tensor> ScoreResponses(const ModelConfig& model, const Weights& w,
                                  const PromptBatch& prompts,
                                  const at::Tensor& responses,
                                  const TokenSpec& spec) {
  const at::Tensor mask = ResponseMask(responses, spec);
  Sequences seq = BuildSequences(prompts, responses, mask);
  HY_ASSIGN_OR_RETURN(at::Tensor hidden,
                      Trunk(model, w, seq.tokens, seq.positions, seq.valid,
                            TpContext{}, nullptr));
  const int64_t r_len = responses.size(1);
  at::Tensor h = hidden.narrow(1, prompts.prompt_len - 1, r_len);
  HY_ASSIGN_OR_RETURN(at::Tensor logits, LmHead(w, h, TpContext{}));
  return TokenLogProbs(logits.to(at::kFloat), responses.to(logits.device()),
                       1.0, nullptr)
             .cpu() *
         mask;
}

// The command line's choices over what the run or directory gives (dtype,
// lengths, reward), and the data file read in order. Returns
// InvalidArgument for a dtype other than float32 or bfloat16.
Status ApplyOptions(const EvalOptions& o, Loaded* l) {
  if (!o.dtype.empty()) {
    if (o.dtype != "float32" && o.dtype != "bfloat16") {
      return Status::InvalidArgument(
          "--dtype must be float32 or bfloat16, got " + o.dtype);
    }
    l->bf16 = o.dtype == "bfloat16";
  }
  if (o.max_new_tokens > 0) l->max_new_tokens = o.max_new_tokens;
  if (o.max_prompt_length > 0) l->data.max_prompt_length = o.max_prompt_length;
  if (!o.reward.empty()) l->data.reward = o.reward;
  if (!o.reward_file.empty()) l->data.reward_file = o.reward_file;
  if (!o.reward_function.empty()) l->data.reward_function = o.reward_function;
  l->data.enable_thinking = l->data.enable_thinking || o.enable_thinking;
  l->data.train_files = {o.data_file};
  l->data.val_files.clear();
  l->data.shuffle = false;
  return Status::OK();
}

// One prompt's sample: `full` ([R] sampled ids) cut after its first eos,
// rendered, scored `score`; `logprob_row` ([R], or undefined) cut alike.
EvalSample MakeSample(const PromptSource& source, const Prompt& prompt,
                      int64_t index, const std::vector<int>& full,
                      double score, const at::Tensor& logprob_row) {
  const TokenSpec& spec = source.token_spec();
  EvalSample s;
  s.index = index;
  s.reward = score;
  s.exact = source.IsExact(s.reward);
  auto eos = std::find_if(full.begin(), full.end(),
                          [&](int id) { return spec.IsEos(id); });
  s.ended_with_eos = eos != full.end();
  s.response_ids.assign(full.begin(), s.ended_with_eos ? eos + 1 : full.end());
  s.response = source.Render(std::vector<int>(full.begin(), eos));
  s.prompt = source.Render(prompt.tokens);
  s.prompt_ids = prompt.tokens;
  if (logprob_row.defined()) {
    const at::Tensor row = logprob_row.narrow(0, 0, s.response_ids.size())
                               .to(at::kDouble)
                               .contiguous();
    s.response_logprobs.assign(row.data_ptr<double>(),
                               row.data_ptr<double>() + row.numel());
  }
  return s;
}

bool SameIds(const TokenSpec& a, const TokenSpec& b) {
  std::vector<int> x = a.eos, y = b.eos;
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  return x == y && a.pad == b.pad;
}

// The model `o` names (an HF directory: one with a config.json; else a
// run's store) with the command line's choices applied.
Status LoadModel(const EvalOptions& o, Loaded* l) {
  if (fs::exists(fs::path(o.source) / "config.json")) {
    HY_RETURN_IF_ERROR(LoadHf(o, l));
  } else {
    HY_RETURN_IF_ERROR(LoadRun(o, l));
  }
  return ApplyOptions(o, l);
}

// FailedPrecondition when the tokenizer's special ids are not those the
// run recorded; InvalidArgument when the longest prompt plus the new
// tokens does not fit the model's positions.
Status CheckFits(const Loaded& l, const PromptSource& source) {
  if (l.recorded && !SameIds(*l.recorded, source.token_spec())) {
    return Status::FailedPrecondition(
        "the tokenizer now gives other special ids than the run trained "
        "with");
  }
  if (source.max_prompt_tokens() + l.max_new_tokens >
      l.model.max_position_embeddings) {
    return Status::InvalidArgument(
        "the longest prompt (" + std::to_string(source.max_prompt_tokens()) +
        " tokens) plus " + std::to_string(l.max_new_tokens) +
        " new tokens exceeds the model's max_position_embeddings " +
        std::to_string(l.model.max_position_embeddings));
  }
  return Status::OK();
}

// What the samples add up to: their rewards and how many scored exact.
struct Totals {
  double reward = 0;
  double exact = 0;
};

// Decodes, scores and reports (on_sample) prompts [begin, end) of
// `source` with weights `w`: the decoding time and new tokens into
// `report`, the rewards into `totals`.
Status EvaluateBatch(const EvalOptions& o, const Loaded& l, const Weights& w,
                     const PromptSource& source, const RolloutConfig& rc,
                     int64_t begin, int64_t end,
                     const std::function<void(const EvalSample&)>& on_sample,
                     EvalReport* report, Totals* totals) {
  const TokenSpec& spec = source.token_spec();
  std::vector<Prompt> prompts;
  std::vector<int64_t> ids;
  int64_t prompt_len = 0;
  for (int64_t p = begin; p < end; ++p) {
    HY_ASSIGN_OR_RETURN(Prompt prompt, source.Get(static_cast<uint64_t>(p)));
    prompt_len = std::max<int64_t>(prompt_len, prompt.tokens.size());
    prompts.push_back(std::move(prompt));
    ids.push_back(p);
  }
  const PromptBatch batch_prompts = BuildPrompts(prompts, prompt_len, spec);
  const auto generate_start = std::chrono::steady_clock::now();
  HY_ASSIGN_OR_RETURN(at::Tensor responses,
                      GenerateResponses(l.model, w, TpContext{}, batch_prompts,
                                        ids, o.seed, 0, rc, spec));
  report->generate_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                    generate_start)
          .count();
  const std::vector<std::vector<int>> fulls = ResponseRows(responses);
  at::Tensor logprobs;
  if (o.logprobs) {
    HY_ASSIGN_OR_RETURN(logprobs, ScoreResponses(l.model, w, batch_prompts,
                                                 responses, spec));
  }
  HY_ASSIGN_OR_RETURN(std::vector<RewardScore> scores,
                      source.ScoreAll(prompts, fulls));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const EvalSample s = MakeSample(
        source, prompts[i], ids[i], fulls[i], scores[i].score,
        logprobs.defined() ? logprobs[static_cast<int64_t>(i)] : at::Tensor());
    report->new_tokens += static_cast<int64_t>(s.response_ids.size());
    totals->reward += s.reward;
    totals->exact += s.exact ? 1 : 0;
    if (on_sample) on_sample(s);
  }
  return Status::OK();
}

}  // namespace

Result<EvalReport> Evaluate(
    const EvalOptions& o,
    const std::function<void(const EvalSample&)>& on_sample) {
  const auto start = std::chrono::steady_clock::now();
  Loaded l;
  HY_RETURN_IF_ERROR(LoadModel(o, &l));
  HY_ASSIGN_OR_RETURN(
      std::unique_ptr<PromptSource> source,
      MakeDatasetSource(l.data, "", l.model_eos, o.seed, l.model.vocab_size));
  HY_RETURN_IF_ERROR(CheckFits(l, *source));
  std::map<std::string, at::Tensor> tensors;
  HY_ASSIGN_OR_RETURN(Weights w, LoadWeights(l, &tensors));

  at::NoGradGuard no_grad;
  RolloutConfig rc;
  rc.response_length = l.max_new_tokens;
  rc.temperature = o.temperature;
  rc.top_k = o.top_k;
  EvalReport report;
  report.model = l.label;
  const int64_t count = static_cast<int64_t>(source->num_prompts());
  const int64_t batch = std::max(1, o.batch_size);
  Totals totals;
  for (int64_t begin = 0; begin < count; begin += batch) {
    HY_RETURN_IF_ERROR(EvaluateBatch(o, l, w, *source, rc, begin,
                                     std::min(count, begin + batch),
                                     on_sample, &report, &totals));
  }
  if (l.reader != nullptr) report.notes = l.reader->fallbacks();
  report.prompts = count;
  report.reward_mean =
      count > 0 ? totals.reward / static_cast<double>(count) : 0;
  report.exact_match =
      count > 0 ? totals.exact / static_cast<double>(count) : 0;
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return report;
}

}  // namespace hy::trainer
