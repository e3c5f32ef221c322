#include "metrics/plot_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>

#include "cli_util.h"
#include "hy/metrics/tensorboard/event_reader.h"
#include "metrics/run_plot.h"
#include "train/train_events.h"

namespace hy::cli {
namespace {

namespace fs = std::filesystem;
namespace tb = metrics::tensorboard;

struct PlotArgs {
  std::string root;
  std::string out;  // Default <root>/run.png.
  PlotOptions options;
};

// The events directory of `root`: <root>/tensorboard, or `root` itself when
// it holds events files.
Result<std::string> EventsDir(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return Status::NotFound("no directory " + root);
  }
  const std::string dir = TensorBoardDir(root);
  if (fs::is_directory(dir, ec)) return dir;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (tb::IsEventFileName(it->path().filename().string())) return root;
  }
  return Status::NotFound("no TensorBoard events in " + root +
                          " (hyctl train writes them to " + dir + ")");
}

int Plot(const PlotArgs& a) {
  Result<std::string> dir = EventsDir(a.root);
  if (!dir.ok()) return Report("plot", dir.status());
  Result<tb::RunEvents> run = tb::ReadRunEvents(*dir);
  if (!run.ok()) return Report("plot", run.status());
  if (run->truncated_tail_bytes > 0) {
    std::cerr << "hyctl plot: skipped " << run->truncated_tail_bytes
              << " byte(s) of records cut short at the end of an events file "
                 "(a writer killed mid-record)\n";
  }
  const std::string out =
      a.out.empty() ? (fs::path(a.root) / "run.png").string() : a.out;
  PlotOptions o = a.options;
  const std::vector<PlotPoint> reward = TagSeries(*run, "ppo/reward_mean");
  if (o.title.empty() && !reward.empty()) {
    o.title = "hy run " + a.root + ": iterations " +
              std::to_string(static_cast<int64_t>(reward.front().x)) + "-" +
              std::to_string(static_cast<int64_t>(reward.back().x)) + " (" +
              std::to_string(run->files.size()) + " events file(s))";
  }
  if (const Status s = PlotRun(*run, o, out); !s.ok()) {
    return s.IsInvalidArgument() ? ReportArgs("plot", s) : Report("plot", s);
  }
  std::cout << "wrote " << out << " (" << o.width << "x" << o.height << ", "
            << reward.size() << " iterations)\n";
  return kExitOk;
}

}  // namespace

void AddPlotCommand(CLI::App* app, int* exit_code) {
  auto args = std::make_shared<PlotArgs>();
  CLI::App* plot = app->add_subcommand(
      "plot",
      "Draw a run's main curves (reward and held-out exact match, KL, "
      "losses, iteration time by phase) as a PNG, from RUN_ROOT/tensorboard");
  plot->add_option("RUN_ROOT", args->root,
                   "Run root (hyctl train's --store), or a directory of "
                   "TensorBoard events files")
      ->required();
  plot->add_option("--png", args->out,
                   "PNG file to write (default RUN_ROOT/run.png)");
  AddOldSpelling(plot, "-o", "--png", &args->out);
  AddOldSpelling(plot, "--out", "--png", &args->out);
  plot->add_option("--width", args->options.width, "Width in pixels")
      ->capture_default_str();
  plot->add_option("--height", args->options.height, "Height in pixels")
      ->capture_default_str();
  plot->add_option("--title", args->options.title,
                   "Title above the charts (default: the run root and its "
                   "iterations)");
  plot->callback([args, exit_code] { *exit_code = Plot(*args); });
}

}  // namespace hy::cli
