// hyctl's store commands, each a verb on a store directory:
//   inspect STORE[@N] [--step N]  steps, or one step's tensors; for a run
//                                 root (node-<k>/ dirs), each step's
//                                 copies per old rank and whether it is
//                                 recoverable
//   verify  STORE[@N] [--step N]  decode and check every chunk (exit 3 on
//                                 any corruption)
//   (gc and repair: maintenance_commands.h; import and export:
//   transfer_commands.h; diff: diff_command.h; inspect on a run root:
//   inspect_run.h)
// Steps are the unit; --version-id V reads a store's internal version
// (version_select.h).
// Read-only commands open the store read-only.

#ifndef HY_CLI_STORE_STORE_COMMANDS_H_
#define HY_CLI_STORE_STORE_COMMANDS_H_

#include <cstdint>
#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// Add the commands to `app`; a command that runs stores its exit code in
// `*exit_code`, which must outlive app.parse().
void AddStoreCommands(CLI::App* app, int* exit_code);  // inspect/verify

// Unix ms as "2026-11-22T04:46:50Z".
std::string Iso8601(int64_t ms);

}  // namespace hy::cli

#endif  // HY_CLI_STORE_STORE_COMMANDS_H_
