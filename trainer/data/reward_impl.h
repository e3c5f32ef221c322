// The rewards MakeReward (reward.h) builds, each defined in its own
// <name>_reward.cc. Internal to hy_trainer_data.

#ifndef HY_TRAINER_DATA_REWARD_IMPL_H_
#define HY_TRAINER_DATA_REWARD_IMPL_H_

#include <memory>

#include "hy/trainer/data/reward.h"

namespace hy::trainer {

std::unique_ptr<RewardFunction> NewExactMatchReward(bool require_eos);
std::unique_ptr<RewardFunction> NewFormatReward();
std::unique_ptr<RewardFunction> NewStrictReward(bool require_eos);
// Starts the worker (python_reward.cc); errors as MakeReward's for python.
Result<std::unique_ptr<RewardFunction>> NewPythonReward(
    const std::string& file, const std::string& function);

// Sum of exact_match and format, weighted.
// REQUIRES: both weights finite and >= 0.
std::unique_ptr<RewardFunction> NewExactMatchFormatReward(
    bool require_eos, double exact_match_weight, double format_weight);

}  // namespace hy::trainer

#endif  // HY_TRAINER_DATA_REWARD_IMPL_H_
