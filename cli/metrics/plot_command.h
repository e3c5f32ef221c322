// `hyctl plot RUN_ROOT [-o PNG]`: a PNG of a run's main curves (run_plot.h)
// from its TensorBoard events, for a person without TensorBoard or a
// Prometheus server.

#ifndef HY_CLI_METRICS_PLOT_COMMAND_H_
#define HY_CLI_METRICS_PLOT_COMMAND_H_

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// Adds the "plot" subcommand to `app`; when it runs, its exit code is stored
// in `*exit_code`. `exit_code` must outlive app.parse().
void AddPlotCommand(CLI::App* app, int* exit_code);

}  // namespace hy::cli

#endif  // HY_CLI_METRICS_PLOT_COMMAND_H_
