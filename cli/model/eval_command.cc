// hyctl eval MODEL DATA: see eval_command.h. Text output: one summary line
// (the rate first); -o json: one JSON object per prompt, then the summary
// object. --samples FILE writes the per-prompt objects there instead.

#include "model/eval_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "hy/trainer/ppo/evaluate.h"

namespace hy::cli {
namespace {

using Json = nlohmann::json;

struct EvalArgs {
  trainer::EvalOptions options;
  std::string samples;
  std::string format;
};

Json SampleJson(const trainer::EvalSample& s) {
  Json j = {{"index", s.index},
          {"prompt", s.prompt},
          {"prompt_ids", s.prompt_ids},
          {"response", s.response},
          {"response_ids", s.response_ids},
          {"ended_with_eos", s.ended_with_eos},
          {"reward", s.reward},
          {"exact", s.exact}};
  if (!s.response_logprobs.empty()) {
    j["response_logprobs"] = s.response_logprobs;
  }
  return j;
}

int Eval(const EvalArgs& a) {
  std::ofstream samples;
  if (!a.samples.empty()) {
    samples.open(a.samples, std::ios::trunc);
    if (!samples) {
      return Report("eval", Status::IOError("cannot write " + a.samples));
    }
  }
  const bool json = a.format == "json";
  auto report = trainer::Evaluate(
      a.options, [&](const trainer::EvalSample& s) {
        if (samples.is_open()) {
          samples << SampleJson(s).dump() << "\n";
        } else if (json) {
          std::cout << SampleJson(s).dump() << "\n";
        }
      });
  if (!report.ok()) return Report("eval", report.status());
  for (const std::string& n : report->notes) std::cerr << "eval: " << n << "\n";
  if (samples.is_open() && !samples.flush()) {
    return Report("eval", Status::IOError("cannot write " + a.samples));
  }
  const trainer::EvalReport& r = *report;
  if (json) {
    std::cout << Json{{"model", r.model},
                      {"prompts", r.prompts},
                      {"exact_match", r.exact_match},
                      {"reward_mean", r.reward_mean},
                      {"new_tokens", r.new_tokens},
                      {"seconds", r.seconds},
                      {"generate_seconds", r.generate_seconds}}
                     .dump()
              << "\n";
  } else {
    char line[256];
    std::snprintf(line, sizeof(line),
                  "exact match %.3f, mean reward %.3f over %lld prompts "
                  "(%lld new tokens, %.1f s)",
                  r.exact_match, r.reward_mean,
                  static_cast<long long>(r.prompts),
                  static_cast<long long>(r.new_tokens), r.seconds);
    std::cout << line << ": " << r.model << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddEvalCommand(CLI::App* app, int* exit_code) {
  auto args = std::make_shared<EvalArgs>();
  trainer::EvalOptions& o = args->options;
  CLI::App* cmd = app->add_subcommand(
      "eval",
      "Decode a JSONL prompt file with a run's checkpoint or a Hugging Face "
      "directory and score the responses");
  cmd->add_option("model", o.source,
                  "A run's store root (hyctl train) or a Hugging Face model "
                  "directory")
      ->required();
  cmd->add_option("data", o.data_file,
                  "JSON Lines prompts with answers (hyctl data gen-arith)")
      ->required();
  cmd->add_option("--step", o.step, "Committed step (default: newest)");
  cmd->add_option("--model", o.model, "actor (default) | reference");
  cmd->add_option("--tokenizer", o.tokenizer,
                  "Tokenizer directory (default: the run's, or the "
                  "model directory's)");
  cmd->add_option("--reward", o.reward,
                  "Reward: exact_match, strict, format, exact_match+format, "
                  "python (default: the run's data.reward, else exact_match)");
  cmd->add_option("--reward-file", o.reward_file,
                  "--reward python: the .py file (default: the run's "
                  "data.reward_file)");
  cmd->add_option("--reward-function", o.reward_function,
                  "--reward python: the function in it (default: the run's "
                  "data.reward_function, else compute_score)");
  cmd->add_option("--max-new-tokens", o.max_new_tokens,
                  "Tokens per response (default: the run's "
                  "rollout.response_length, else 64)");
  cmd->add_option("--temperature", o.temperature, "0 (default): greedy");
  cmd->add_option("--top-k", o.top_k, "Sample from the k largest logits");
  cmd->add_option("--seed", o.seed, "Seed of the sampled draws");
  cmd->add_option("--dtype", o.dtype,
                  "float32 | bfloat16 weights (default: a run's rollout "
                  "dtype, bfloat16; a directory's own)");
  cmd->add_option("--batch-size", o.batch_size, "Prompts per batch (64)");
  cmd->add_option("--max-prompt-length", o.max_prompt_length,
                  "Tokens (default: the run's data.max_prompt_length, "
                  "else 1024)");
  cmd->add_flag("--enable-thinking", o.enable_thinking,
                "Qwen3 chat templates: think before answering");
  cmd->add_flag("--logprobs", o.logprobs,
                "Also write each response token's log-probability "
                "(response_logprobs): a forward over prompt and response, "
                "as the trainer scores its rollouts");
  cmd->add_option("--samples", args->samples,
                  "Write one JSON object per prompt to this file");
  AddOutputOption(cmd, &args->format, {"text", "json"});
  cmd->callback([args, exit_code] { *exit_code = Eval(*args); });
}

}  // namespace hy::cli
