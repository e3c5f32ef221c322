// hyctl: the command-line tool of hy. Each noun (metrics, store, reshard,
// train, ...) adds itself from its own <noun>_command.cc.

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "cli_util.h"
#include "data_command.h"
#include "eval_command.h"
#include "export_hf_command.h"
#include "hy/metrics/hy_metrics.h"
#include "maintenance_commands.h"
#include "metrics_command.h"
#include "reshard_command.h"
#include "restore_command.h"
#include "store_commands.h"
#include "tokenize_command.h"
#include "train_command.h"

int main(int argc, char** argv) {
  using hy::cli::kExitError;
  using hy::cli::kExitOk;
  using hy::cli::kExitUsage;

  CLI::App app{
      "hyctl: keeps the training state of RL post-training jobs "
      "consistent and recoverable.",
      "hyctl"};
  app.footer(hy::cli::ExitCodeHelp());
  app.set_version_flag("--version",
                       "hyctl " + std::string(hy::metrics::HyVersion()));
  app.require_subcommand(1);

  int exit_code = kExitOk;
  hy::cli::AddMetricsCommand(&app, &exit_code);
  hy::cli::AddStoreCommands(&app, &exit_code);
  hy::cli::AddMaintenanceCommands(&app, &exit_code);
  hy::cli::AddTransferCommands(&app, &exit_code);
  hy::cli::AddDiffCommand(&app, &exit_code);
  hy::cli::AddReshardCommands(&app, &exit_code);
  hy::cli::AddExportHfCommand(&app, &exit_code);
  hy::cli::AddEvalCommand(&app, &exit_code);
  hy::cli::AddRestoreCommand(&app, &exit_code);
  hy::cli::AddTrainCommand(&app, &exit_code);
  hy::cli::AddDataCommand(&app, &exit_code);
  hy::cli::AddTokenizeCommand(&app, &exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here too, with exit code 0.
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "hyctl: " << e.what() << "\n";
    return kExitError;
  }
  return exit_code;
}
