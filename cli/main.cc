// hyctl: the command-line tool of hy. Each noun (metrics, store, reshard,
// train, ...) adds itself from its own <noun>_command.cc.

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "hy/common/edit_distance.h"
#include "hy/launcher/stop_signals.h"
#include "hy/metrics/hy_metrics.h"
#include "metrics/metrics_command.h"
#include "model/data_command.h"
#include "model/eval_command.h"
#include "model/export_hf_command.h"
#include "store/maintenance_commands.h"
#if HY_WITH_TENSORBOARD
#include "metrics/plot_command.h"
#endif
#include "layout/reshard_command.h"
#include "layout/restore_command.h"
#include "model/tokenize_command.h"
#include "store/diff_command.h"
#include "store/store_commands.h"
#include "store/transfer_commands.h"
#include "train/train_command.h"

namespace {

// After a parse error: "did you mean" for the first word of the command
// line that names no command or option but is near one.
void SuggestFix(CLI::App* app, int argc, char** argv) {
  CLI::App* cmd = app;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return;
    if (arg.rfind("--", 0) == 0) {
      const std::string name = arg.substr(2, arg.find('=') - 2);
      if (name.empty() || cmd->get_option_no_throw("--" + name) != nullptr) {
        continue;
      }
      std::vector<std::string> known;
      for (const CLI::Option* o : cmd->get_options()) {
        for (const std::string& l : o->get_lnames()) known.push_back(l);
      }
      const std::string near = hy::NearestName(name, known, 2);
      if (!near.empty()) {
        std::cerr << "hyctl: unknown option --" << name << "; did you mean --"
                  << near << "?\n";
      }
      return;
    }
    if (arg.empty() || arg[0] == '-') continue;
    CLI::App* sub = nullptr;
    for (CLI::App* c : cmd->get_subcommands([](CLI::App*) { return true; })) {
      if (c->check_name(arg)) sub = c;
    }
    if (sub != nullptr) {
      cmd = sub;
      continue;
    }
    if (cmd != app) continue;  // A positional argument of the command.
    std::vector<std::string> names;
    for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
      names.push_back(sub->get_name());
    }
    const std::string near = hy::NearestName(arg, names, 2);
    if (!near.empty()) {
      std::cerr << "hyctl: unknown command '" << arg << "'; did you mean "
                << near << "?\n";
    }
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "train") {
    hy::launcher::HoldStopSignals();  // Until the launcher or worker catches them.
  }
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
#if HY_WITH_TENSORBOARD
  hy::cli::AddPlotCommand(&app, &exit_code);
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here too, with exit code 0.
    int rc = app.exit(e);
    if (rc != 0) SuggestFix(&app, argc, argv);
    return rc == 0 ? kExitOk : kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "hyctl: " << e.what() << "\n";
    return kExitError;
  }
  return exit_code;
}
