// hyctl's store commands, each a verb on a store directory:
//   inspect STORE [--version V]   versions, or one version's tensors
//   verify  STORE [--version V]   decode and check every chunk (exit 3 on
//                                 any corruption)
//   gc      STORE --keep N        drop old versions and unreferenced chunks
//   import  STORE --safetensors F commit a safetensors file as a version
//   export  STORE --version V --safetensors F
// Read-only commands open the store read-only.

#ifndef HY_CLI_STORE_COMMANDS_H_
#define HY_CLI_STORE_COMMANDS_H_

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// Add the commands to `app`; a command that runs stores its exit code in
// `*exit_code`, which must outlive app.parse().
void AddStoreCommands(CLI::App* app, int* exit_code);     // inspect/verify/gc
void AddTransferCommands(CLI::App* app, int* exit_code);  // import/export

}  // namespace hy::cli

#endif  // HY_CLI_STORE_COMMANDS_H_
