// The picture `hyctl plot` draws of a run, from the run's own TensorBoard
// events (<run root>/tensorboard, read back with TensorBoard's rule that a
// restart's SessionLog START replaces the steps it redoes): four charts,
// reward and exact match (training and held-out), KL, the policy and value
// losses, and each iteration's time split into reshard, rollout, update,
// checkpoint and the rest, written as a PNG with cairo.
//
// Thread-safety: plain functions.

#ifndef HY_CLI_METRICS_RUN_PLOT_H_
#define HY_CLI_METRICS_RUN_PLOT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hy/common/status.h"
#include "hy/metrics/tensorboard/event_reader.h"
#include "metrics/plot_panel.h"

namespace hy::cli {

struct PlotOptions {
  int width = 1600;  // Pixels.
  int height = 1000;
  std::string title;  // Above the charts; may be empty.
};

// One tag of `run` as points by step: the last value read at each step,
// NaN kept (a gap).
std::vector<PlotPoint> TagSeries(const metrics::tensorboard::RunEvents& run,
                                 const std::string& tag);

// Draws `run` and writes the PNG to `png_path`. Returns InvalidArgument for
// a size outside 320x240 .. 10000x10000, FailedPrecondition when `run` has
// no iteration scalars (ppo/reward_mean), IOError when the PNG cannot be
// written.
Status PlotRun(const metrics::tensorboard::RunEvents& run,
               const PlotOptions& options, const std::string& png_path);

}  // namespace hy::cli

#endif  // HY_CLI_METRICS_RUN_PLOT_H_
