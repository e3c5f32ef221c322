// Exit codes (see exit_codes.h).

#include "hy/launcher/exit_codes.h"

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

}  // namespace hy::launcher
