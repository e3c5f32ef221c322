// Exit codes (see exit_codes.h).

#include "hy/launcher/exit_codes.h"

#include <iostream>

namespace hy::launcher {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kNotFound:
      return kExitNotFound;
    case StatusCode::kDataLoss:
      return kExitDataLoss;
    default:
      return kExitError;
  }
}

int Report(std::string_view command, const Status& status) {
  if (!status.ok()) {
    std::cerr << "hyctl " << command << ": " << status.ToString() << "\n";
  }
  return ExitCodeFor(status);
}

int ReportArgs(std::string_view command, const Status& status) {
  const int code = Report(command, status);
  return status.IsInvalidArgument() ? kExitUsage : code;
}

}  // namespace hy::launcher
