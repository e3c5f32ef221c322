// hyctl restore: one rank's shards of a run's committed step, cut for a new
// layout, as a safetensors file, and how a layout is spelled for it.
#ifndef HY_CLI_LAYOUT_RESTORE_COMMAND_H_
#define HY_CLI_LAYOUT_RESTORE_COMMAND_H_

#include <optional>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/shard.h"
#include "hy/reshard/layout.h"

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// Adds `restore ROOT --layout L --rank R --out DIR [--version STEP]
// [--allow-other-run]`; the
// command stores its exit code in `*exit_code`, which must outlive
// app.parse().
void AddRestoreCommand(CLI::App* app, int* exit_code);

// How a restored rank's shards are cut: "fsdp=N" (each tensor flattened
// and split evenly over N ranks), "replicated" (whole tensors), or any
// other layout reshard takes (tp, pp, dp, fsdp together: each model of the
// run cut as its trainer would, run_models.h).
struct RestoreLayout {
  bool replicated = false;
  int fsdp = 1;      // Ranks the tensors are split over (when !replicated).
  std::string text;  // Canonical spelling: "fsdp=N", "replicated" or
                     // the layout's (reshard::Layout::ToString).
  // Set for a layout other than fsdp=N and replicated.
  std::optional<reshard::Layout> model_layout;
  int world_size() const {
    return replicated     ? 1 << 20
           : model_layout ? model_layout->world_size()
                          : fsdp;
  }
};
// Returns InvalidArgument, quoting `text`, for a layout that does not
// parse.
Result<RestoreLayout> ParseRestoreLayout(const std::string& text);

// The elements [begin, end) of a tensor of `numel` elements that rank
// `rank` of `world` holds under an even flat split: begin =
// floor(rank * numel / world), end = floor((rank + 1) * numel / world), so
// the ranks' pieces differ by at most one element.
// REQUIRES: numel >= 0, 0 <= rank < world.
FlatRun EvenFlatPiece(int64_t numel, int world, int rank);

}  // namespace hy::cli

#endif  // HY_CLI_LAYOUT_RESTORE_COMMAND_H_
