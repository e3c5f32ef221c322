// `hyctl metrics`: prints every metric hy exports (the HyMetrics catalogue
// plus the exporter's own metrics) at zero, as the Prometheus text exposition
// (default), a table, or JSON: the reference list for operators, dashboards
// and tests.

#ifndef HY_CLI_METRICS_METRICS_COMMAND_H_
#define HY_CLI_METRICS_METRICS_COMMAND_H_

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// Adds the "metrics" subcommand to `app`; when it runs, its exit code is
// stored in `*exit_code`. `exit_code` must outlive app.parse().
void AddMetricsCommand(CLI::App* app, int* exit_code);

}  // namespace hy::cli

#endif  // HY_CLI_METRICS_METRICS_COMMAND_H_
