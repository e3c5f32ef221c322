// hyctl train's flags and the effective config they resolve to: config
// file, the stored config of a resumed run, --set overrides, flags, the
// default store root (train_config.cc), and the checks of a resume that
// train_command.cc hands the supervisor (launcher/).
//
// Thread-safety: plain functions.

#ifndef HY_CLI_TRAIN_TRAIN_CONFIG_H_
#define HY_CLI_TRAIN_TRAIN_CONFIG_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/launcher/supervisor.h"
#include "hy/trainer/config/config.h"

namespace hy::cli {

// The supervisor hands the effective config to its workers in this
// variable.
using launcher::kConfigEnv;

struct TrainFlags {
  std::string config_file;
  std::vector<std::string> sets;
  int nproc = 0;
  int64_t iterations = 0;
  uint64_t seed = 0;
  int metrics_port = 0;
  std::string store, store_root, resume;
  std::string model;  // A Hugging Face model directory (model.path).
  std::string device;  // --device: trainer.device ("" keeps the config's).
  // --rollout-engine: rollout.engine ("" keeps the config's).
  std::string rollout_engine;
  std::vector<std::string> data, val_data;  // JSONL prompt files.
  bool allow_other_run = false;
  std::string format;
  bool print_config = false;
  int64_t max_iterations = -1;
  bool worker = false;
  int max_restarts = 3;
  int min_nodes = 1;
  int64_t from_step = -1;   // --from-step: resume from this step (>= 0).
  bool drop_newer = false;  // --drop-newer: with --from-step.
  // Whether the flags that have no "unset" value were given.
  CLI::Option* nproc_opt = nullptr;
  CLI::Option* iterations_opt = nullptr;
  CLI::Option* seed_opt = nullptr;
  CLI::Option* metrics_port_opt = nullptr;
};

// The environment variable `name`, or null when unset or empty.
const char* Env(const char* name);

// The effective config: under a launcher (worker with kConfigEnv set) the
// launcher's; else the stored config of --resume, the config file, --set
// overrides and flags, in that order (the config file's relative paths,
// model.path, data.tokenizer, data.*_files and checkpoint.store_root, are
// read against its directory; those of flags and --set against the current
// one), with the store root resolved
// (`worker`: running under torchrun, whose default root is named by the
// run id). Returns InvalidArgument for a bad file, override, flag or
// value, NotFound for a missing file.
Result<trainer::TrainConfig> ResolveConfig(const TrainFlags& f, bool worker);

}  // namespace hy::cli

#endif  // HY_CLI_TRAIN_TRAIN_CONFIG_H_
