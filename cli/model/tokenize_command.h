// hyctl tokenize: JSON Lines text <-> token ids with a Hugging Face
// tokenizer.json (hy/trainer/tokenizer/tokenizer.h).
#ifndef HY_CLI_MODEL_TOKENIZE_COMMAND_H_
#define HY_CLI_MODEL_TOKENIZE_COMMAND_H_

#include <CLI/CLI.hpp>

namespace hy::cli {

// Adds `tokenize --tokenizer PATH [--decode] [--add-special-tokens]
// [--skip-special-tokens]`.
void AddTokenizeCommand(CLI::App* app, int* exit_code);

}  // namespace hy::cli

#endif  // HY_CLI_MODEL_TOKENIZE_COMMAND_H_
