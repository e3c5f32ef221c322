// One FSDP training step of the trainer at world 1 for hy_bench_train_scale:
// FsdpModel + FsdpPass over a real c10d Gloo group of one rank (its store
// hosted by this process), forward / backward / gradient / Adam, over the
// whole flat buffer and a decoder layer at a time (trainer.fsdp_per_layer),
// each with its peak RSS growth over the model state.

#ifndef HY_BENCH_TRAIN_SCALE_FSDP_H_
#define HY_BENCH_TRAIN_SCALE_FSDP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/trainer/config/model_config.h"

namespace hy::bench {

struct FsdpStepRow {
  bool by_layer = false;
  double seconds = 0;
  double peak_growth_mb = 0;  // Peak RSS over the RSS with the state only.
};

struct FsdpStepResult {
  double state_mb = 0;            // params + two Adam moments (f32).
  double layer_mb = 0;            // One decoder layer's parameters (f32).
  double root_mb = 0;             // Embedding, final norm, head (f32).
  std::vector<FsdpStepRow> rows;  // By layer, then whole.
};

// Returns the comm's or the model's errors.
Result<FsdpStepResult> MeasureFsdpStep(const trainer::ModelConfig& config,
                                       int64_t batch, int64_t seq);

}  // namespace hy::bench

#endif  // HY_BENCH_TRAIN_SCALE_FSDP_H_
