// The exit codes of hyctl, and of the workers the supervisor starts: a
// worker's code tells the supervisor whether a restart can help (see
// supervisor.h); and how hyctl (the supervisor included) reports an error
// with its code. recovery/node_layout.h adds two that only workers use
// (kExitPeerFailed, kExitUnrecoverable).
//
// Thread-safety: constants and a pure function.

#ifndef HY_LAUNCHER_EXIT_CODES_H_
#define HY_LAUNCHER_EXIT_CODES_H_

#include <string_view>

#include "hy/common/status.h"

namespace hy::launcher {

// hyctl's exit codes (also listed in `hyctl --help`).
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,     // Any other failure.
  kExitNotFound = 2,  // A named thing (version, store, metric) is missing.
  kExitDataLoss = 3,  // Stored data is corrupt or truncated.
  kExitUsage = 64,    // Bad command line (EX_USAGE).
  // train: checkpoints cannot be written (a full disk, a write error): the
  // final one failed, or checkpoint.on_failure stop ended the run; never
  // restarted (EX_IOERR).
  kExitCheckpointFailed = 74,
  // train: a well-formed config that cannot run here (a device this
  // machine lacks, data or a tokenizer that does not load) (EX_CONFIG).
  kExitConfig = 78,
};

// Returns the exit code for `status` (kExitOk for OK): NotFound and
// DataLoss have their own, every other error kExitError.
int ExitCodeFor(const Status& status);

// Prints "hyctl <command>: <status>" to stderr unless OK, and returns
// ExitCodeFor(status).
int Report(std::string_view command, const Status& status);

// Report for an error in what the user named (a path of the wrong kind, a
// value no flag takes): InvalidArgument exits kExitUsage, any other status
// as Report says.
int ReportArgs(std::string_view command, const Status& status);

}  // namespace hy::launcher

#endif  // HY_LAUNCHER_EXIT_CODES_H_
