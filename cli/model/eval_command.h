// hyctl eval: decodes a JSONL prompt file with a trainer run's checkpoint or
// a Hugging Face directory and scores the responses
// (hy/trainer/ppo/evaluate.h).
#ifndef HY_CLI_MODEL_EVAL_COMMAND_H_
#define HY_CLI_MODEL_EVAL_COMMAND_H_

#include <CLI/CLI.hpp>

namespace hy::cli {

// Adds `eval MODEL DATA [--step N] [--model actor|reference] [--tokenizer
// DIR] [--reward NAME] [--max-new-tokens N] [--temperature T] [--top-k K]
// [--seed S] [--dtype D] [--batch-size B] [--enable-thinking]
// [--samples FILE] [-o text|json]`.
void AddEvalCommand(CLI::App* app, int* exit_code);

}  // namespace hy::cli

#endif  // HY_CLI_MODEL_EVAL_COMMAND_H_
