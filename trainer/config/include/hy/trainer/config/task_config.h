// TaskConfig: the `task:` section of a run's config, which of the built-in
// digit tasks (task.h) the trainer draws prompts from and how long their
// digit strings are, and the two figures of the tasks the config checks a
// model against (the vocabulary size and the longest prompt). It lives beside
// the rest of the config so that the config reads and validates it without the
// task generator.
//
// Thread-safety: plain values and pure functions.

#ifndef HY_TRAINER_CONFIG_TASK_CONFIG_H_
#define HY_TRAINER_CONFIG_TASK_CONFIG_H_

#include <string_view>
#include <vector>

#include "hy/common/status.h"

namespace hy::trainer {

// The largest digit count a config may ask for (keeps prompts short and
// sequence lengths bounded).
inline constexpr int kMaxTaskDigits = 32;

// The ids of the tasks' vocabulary (task.h lists them).
inline constexpr int kVocabSize = 18;

enum class TaskKind : int { kReverse = 0, kSort = 1, kAdd = 2 };

// Returns "reverse", "sort" or "add".
std::string_view TaskKindName(TaskKind kind);

struct TaskConfig {
  // The kinds to draw from, each with equal probability. Duplicates weight.
  std::vector<TaskKind> kinds = {TaskKind::kReverse, TaskKind::kSort,
                                 TaskKind::kAdd};
  int min_digits = 1;  // Per digit string (per operand for ADD).
  int max_digits = 6;
};

// Returns InvalidArgument when kinds is empty or holds an unknown value, or
// unless 1 <= min_digits <= max_digits <= kMaxTaskDigits.
Status ValidateTaskConfig(const TaskConfig& config);

// The most tokens a prompt of `config` has: an ADD prompt (BOS ADD a PLUS
// b SEP) or a REV / SORT one (BOS marker d SEP) at max_digits.
int MaxPromptTokens(const TaskConfig& config);

}  // namespace hy::trainer

#endif  // HY_TRAINER_CONFIG_TASK_CONFIG_H_
