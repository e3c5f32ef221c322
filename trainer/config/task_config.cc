#include "hy/trainer/config/task_config.h"

#include <algorithm>
#include <string>

namespace hy::trainer {

std::string_view TaskKindName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kReverse:
      return "reverse";
    case TaskKind::kSort:
      return "sort";
    case TaskKind::kAdd:
      return "add";
  }
  return "unknown";
}

Status ValidateTaskConfig(const TaskConfig& config) {
  if (config.kinds.empty()) {
    return Status::InvalidArgument("TaskConfig: no task kinds");
  }
  for (TaskKind k : config.kinds) {
    const int v = static_cast<int>(k);
    if (v < 0 || v > static_cast<int>(TaskKind::kAdd)) {
      return Status::InvalidArgument("TaskConfig: unknown task kind " +
                                     std::to_string(v));
    }
  }
  if (config.min_digits < 1 || config.min_digits > config.max_digits ||
      config.max_digits > kMaxTaskDigits) {
    return Status::InvalidArgument(
        "TaskConfig: need 1 <= min_digits <= max_digits <= " +
        std::to_string(kMaxTaskDigits) + ", got [" +
        std::to_string(config.min_digits) + ", " +
        std::to_string(config.max_digits) + "]");
  }
  return Status::OK();
}

int MaxPromptTokens(const TaskConfig& config) {
  int longest = 0;
  for (TaskKind k : config.kinds) {
    longest = std::max(longest, k == TaskKind::kAdd ? 2 * config.max_digits + 4
                                                    : config.max_digits + 3);
  }
  return longest;
}

}  // namespace hy::trainer
