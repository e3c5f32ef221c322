// hyctl diff (diff_command.cc): two steps (of one store or run root, or
// of two) compared tensor by tensor.
//
// Thread-safety: registration on one thread, before parsing.

#ifndef HY_CLI_STORE_DIFF_COMMAND_H_
#define HY_CLI_STORE_DIFF_COMMAND_H_

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// Adds diff to `app`; when it runs it stores its exit code in
// `*exit_code`, which must outlive app.parse().
void AddDiffCommand(CLI::App* app, int* exit_code);

}  // namespace hy::cli

#endif  // HY_CLI_STORE_DIFF_COMMAND_H_
