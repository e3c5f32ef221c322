// hyctl's store commands, each a verb on a store directory:
//   inspect STORE[@N] [--step N]  steps, or one step's tensors; for a run
//                                 root (node-<k>/ dirs), each step's
//                                 copies per old rank and whether it is
//                                 recoverable
//   verify  STORE[@N] [--step N]  decode and check every chunk (exit 3 on
//                                 any corruption)
//   (gc and repair: maintenance_commands.h)
//   import  STORE --safetensors F commit a safetensors file as a version
//   export  STORE[@N] [--step N] --safetensors F
// Steps are the unit; --version-id V reads a store's internal version
// (version_select.h).
// Read-only commands open the store read-only.

#ifndef HY_CLI_STORE_STORE_COMMANDS_H_
#define HY_CLI_STORE_STORE_COMMANDS_H_

#include <cstdint>
#include <optional>
#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// Add the commands to `app`; a command that runs stores its exit code in
// `*exit_code`, which must outlive app.parse().
void AddStoreCommands(CLI::App* app, int* exit_code);     // inspect/verify
void AddTransferCommands(CLI::App* app, int* exit_code);  // import/export
void AddDiffCommand(CLI::App* app, int* exit_code);       // diff_command.cc

// inspect on a run root (inspect_run.cc): one row per old rank of every
// version, its copies, whether the version is recoverable; `only_step`
// keeps that step. Unless `quick`, every committed copy is verified and
// damaged ones are flagged (and not counted recoverable). Returns the exit
// code.
int InspectRunRoot(const std::string& root, std::optional<uint64_t> only_step,
                   const std::string& format, bool quick);
// Unix ms as "2026-11-22T04:46:50Z".
std::string Iso8601(int64_t ms);

}  // namespace hy::cli

#endif  // HY_CLI_STORE_STORE_COMMANDS_H_
