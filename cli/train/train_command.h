// `hyctl train`: distributed PPO on the built-in verifiable-reward task
// (hy/trainer/ppo/worker.h), checkpointing into hy stores.
//
//   hyctl train [--config FILE] [--set section.key=value]... [--nproc N]
//               [--iterations N] [--seed S] [--metrics-port P]
//               [--store DIR | --store-root DIR | --resume STORE]
//               [-o text|json] [--print-config]
//
// The effective config is the defaults, then the YAML file, then each --set
// in order, then the flags (--nproc: trainer.nproc, --iterations:
// trainer.total_iterations, --seed: trainer.seed, --metrics-port:
// metrics.port). The store root is --store DIR as given, or --resume STORE
// (a run root; resumes from its newest committed version: the launcher
// first checks that there is one, below trainer.total_iterations, and
// creates nothing otherwise, train_config.h CheckResume), or
// DIR/run-YYYYmmdd-HHMMSS for --store-root DIR, or, when none of them and
// no checkpoint.store_root is set, runs/run-YYYYmmdd-HHMMSS under the
// working directory. --print-config prints the effective config as YAML.
//
// Launcher mode (RANK is not set): starts trainer.nproc workers, each this
// executable with the same arguments plus the hidden --worker flag and the
// effective config as YAML in HY_TRAIN_CONFIG_YAML, and restarts them on
// the surviving nodes after a failure (launcher/: hy/launcher/supervisor.h,
// which starts them through worker_launcher.h). Rank 0's report lines are this command's
// stdout; logs go to stderr.
//
// Worker mode (RANK set, as torchrun sets it, or --worker): runs one rank.
// Without HY_TRAIN_CONFIG_YAML (torchrun --no-python hyctl train ...) each
// rank builds the config from its flags; the default store root is then
// runs/torchrun-$MASTER_PORT (DIR/torchrun-$MASTER_PORT with --store-root),
// the same on every rank. Rank 0 serves metrics on 127.0.0.1:metrics.port
// when it is >= 0, pushes them to metrics.pushgateway when set, and prints
// one line per iteration (text, or a JSON object with -o json) and a
// summary (on stderr with -o json, so stdout stays JSON lines).
//
// Thread-safety: runs on hyctl's main thread; the worker's report and log
// callbacks (which may come from other threads) serialize their output.

#ifndef HY_CLI_TRAIN_TRAIN_COMMAND_H_
#define HY_CLI_TRAIN_TRAIN_COMMAND_H_

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// Adds the "train" subcommand to `app`; when it runs, its exit code is
// stored in `*exit_code`, which must outlive app.parse().
void AddTrainCommand(CLI::App* app, int* exit_code);


}  // namespace hy::cli

#endif  // HY_CLI_TRAIN_TRAIN_COMMAND_H_
