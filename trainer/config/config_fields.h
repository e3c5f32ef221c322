// The table of TrainConfig's keys (internal to hy_trainer_config): one Field
// per key, with a pointer to its member and the range it accepts. Parsing,
// printing, overrides and validation in config.cc all walk it, so a new key
// is one line in config_fields.cc.
#ifndef HY_TRAINER_CONFIG_CONFIG_FIELDS_H_
#define HY_TRAINER_CONFIG_CONFIG_FIELDS_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "hy/trainer/config/config.h"

namespace hy::trainer::internal {

using FieldPtr = std::variant<int*, int64_t*, uint64_t*, double*, bool*,
                              std::string*, std::vector<std::string>*,
                              std::vector<TaskKind>*, AdvEstimator*>;

// What a key accepts: a range (doubles also finite), or a set of strings.
struct Range {
  const char* want = "must be a finite number";
  double lo = -HUGE_VAL;
  bool lo_open = false;
  double hi = HUGE_VAL;
  bool hi_open = false;
  const char* one_of = nullptr;  // For strings: "|a|b|" (nullptr: any).
};

struct Field {
  std::string path;  // "actor.optim.lr"
  FieldPtr ptr;
  Range range;
};

// Every key of *c, in ToYaml's order (the structs' order). The model's
// ranges are ValidateModelConfig's.
std::vector<Field> Fields(TrainConfig* c);

}  // namespace hy::trainer::internal

#endif  // HY_TRAINER_CONFIG_CONFIG_FIELDS_H_
