// Which committed version a read-only hyctl command reads (inspect, verify,
// export, diff). Users name a step, the unit they train in: `--step N` or
// PATH@N. The store's internal version id (step << 16 | generation in the
// stores hyctl train writes, whatever import chose in a plain store) is
// taken only where asked for, with `--version-id V`.
//
// Thread-safety: plain functions and a plain struct; one thread.

#ifndef HY_CLI_VERSION_SELECT_H_
#define HY_CLI_VERSION_SELECT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "hy/common/result.h"
#include "hy/common/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace hy::statestore {
class Store;
}  // namespace hy::statestore

namespace hy::cli {

// What the user asked for; neither set means the newest committed version.
struct VersionChoice {
  std::optional<uint64_t> step;        // --step N, or PATH@N.
  std::optional<uint64_t> version_id;  // --version-id V (a single store).
};

// Adds `--step N` (described by `step_help`) and `--version-id V` to
// `command`, storing them in `*choice`, which must outlive parsing. The two
// exclude each other.
void AddVersionOptions(CLI::App* command, VersionChoice* choice,
                       const std::string& step_help);

// "PATH@N" (N: a step, digits only) as (PATH, N); anything else is a PATH
// alone.
std::pair<std::string, std::optional<uint64_t>> ParseStateSpec(
    const std::string& spec);

// Takes a trailing "@N" off `*path` (see ParseStateSpec) as the step.
// Returns InvalidArgument when `*path` names a step and another is chosen
// too (--step or --version-id).
Status TakePathStep(std::string* path, VersionChoice* choice);

// A committed version of a store and the training step it records.
struct ChosenVersion {
  uint64_t version = 0;
  uint64_t step = 0;
};

// The version of `store` that `choice` names: for a step, the newest
// committed version whose commit record holds that step; for a version
// id, that version; otherwise the newest committed one. Returns NotFound
// naming the step (or version id) and the store when it is not committed
// there.
Result<ChosenVersion> ChooseVersion(statestore::Store* store,
                                    const VersionChoice& choice);

// InvalidArgument when `choice` names a version id: a run root is read at
// a step (its versions differ from store to store).
Status RequireStepForRunRoot(const std::string& root,
                             const VersionChoice& choice);

}  // namespace hy::cli

#endif  // HY_CLI_VERSION_SELECT_H_
