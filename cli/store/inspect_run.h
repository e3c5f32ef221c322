// hyctl inspect on a run root (inspect_run.cc): one row per old rank of
// every version, its copies, whether the version is recoverable.
//
// Thread-safety: a plain function; one thread.

#ifndef HY_CLI_STORE_INSPECT_RUN_H_
#define HY_CLI_STORE_INSPECT_RUN_H_

#include <cstdint>
#include <optional>
#include <string>

namespace hy::cli {

// Prints, as `format` ("table" or "json"), one row per old rank of every
// version under the run root `root`, its copies and whether the version is
// recoverable; `only_step` keeps that step. Unless `quick`, every
// committed copy is verified and damaged ones are flagged (and not counted
// recoverable). Returns the exit code.
int InspectRunRoot(const std::string& root, std::optional<uint64_t> only_step,
                   const std::string& format, bool quick);

}  // namespace hy::cli

#endif  // HY_CLI_STORE_INSPECT_RUN_H_
