// `hyctl data`: prompt datasets for the trainer. Today one verb:
// `hyctl data gen-arith` writes verifiable arithmetic prompts as JSONL
// (hy/trainer/data/arith_data.h).

#ifndef HY_CLI_MODEL_DATA_COMMAND_H_
#define HY_CLI_MODEL_DATA_COMMAND_H_

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// Adds `data gen-arith OUT.jsonl [--count N] [--seed S] [--ops +,-]
// [--min-digits A] [--max-digits B] [--chat]` to `app`; when it runs, its
// exit code is stored in `*exit_code`. `exit_code` must outlive
// app.parse().
void AddDataCommand(CLI::App* app, int* exit_code);

}  // namespace hy::cli

#endif  // HY_CLI_MODEL_DATA_COMMAND_H_
