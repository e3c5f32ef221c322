// hyctl import and export (transfer_commands.cc):
//   import  STORE --safetensors F  commit a safetensors file as a version
//   export  STORE[@N] [--step N] --safetensors F
//
// Thread-safety: registration on one thread, before parsing.

#ifndef HY_CLI_STORE_TRANSFER_COMMANDS_H_
#define HY_CLI_STORE_TRANSFER_COMMANDS_H_

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// Adds import and export to `app`; a command that runs stores its exit
// code in `*exit_code`, which must outlive app.parse().
void AddTransferCommands(CLI::App* app, int* exit_code);

}  // namespace hy::cli

#endif  // HY_CLI_STORE_TRANSFER_COMMANDS_H_
