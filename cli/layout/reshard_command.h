// hyctl's layout commands:
//   plan    --model-spec FILE | --store STORE --version V, --from L --to L
//           the transfer plan between two layouts, summarised
//   reshard STORE --version V --to LAYOUT
//           commit a new version holding version V's tensors resharded
//
// The tensor order a layout's FSDP flattening follows (see
// hy/reshard/layout.h) is the model spec file's order, or, for a stored
// version, the order its "reshard.tensor_order" blob lists; without that
// blob, names in natural order (digit runs compared as numbers, so layer 2
// comes before layer 10). reshard writes the blob into every version it
// commits.

#ifndef HY_CLI_LAYOUT_RESHARD_COMMAND_H_
#define HY_CLI_LAYOUT_RESHARD_COMMAND_H_

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// The name of the blob that records a version's tensor order
// (hy/reshard/stored_version.h).
inline constexpr const char* kTensorOrderBlob = "reshard.tensor_order";

// Adds plan and reshard to `app`; a command that runs stores its exit code
// in `*exit_code`, which must outlive app.parse().
void AddReshardCommands(CLI::App* app, int* exit_code);

}  // namespace hy::cli

#endif  // HY_CLI_LAYOUT_RESHARD_COMMAND_H_
