// The supervisor: the process half of hy's fault tolerance (recovery/ is
// the state half). It runs a training job's workers on this machine and
// brings the job back by itself when a worker or a node is lost. `hyctl
// train` without RANK turns its flags into a TrainConfig and
// SuperviseOptions and calls Supervise; anything else that starts hy
// workers can too.
//
// Before anything starts it checks what can be checked here: that the
// rollout's TP size divides the workers (unless resuming), that the config
// can run on this machine (CheckRunnable, else exit 78), and, resuming,
// that the run root has a step to continue from (CheckResume; first
// RollBackTo when resuming from an earlier step). It then picks the
// run's id (the environment's HY_RUN_ID, the stores' when resuming, else a
// new one) and a node per worker (recovery::AssignNodes), starts the vLLM
// engines the config asks for (engine_keeper.h; kept across restarts), and
// starts the workers (worker_launcher.h), each with the effective config in
// kConfigEnv.
//
// What is detected, and what happens then:
// - A worker exits non-zero or is killed: the others notice through the
//   heartbeat (checkpoint.heartbeat_timeout_ms) and exit, or are killed
//   heartbeat_timeout + 5 s after the first failure.
// - A node is lost when its directory under the store root is gone (a
//   machine and its disk): the workers restart on the surviving nodes,
//   which recover the last committed step (recovery/, checkpoint/). A
//   worker that died on a node whose directory is still there (a process
//   crash) is restarted on it. The workers learn the restart's count,
//   cause and detection time (HY_RESTART_COUNT, HY_RESTART_CAUSE,
//   HY_DETECT_SECONDS) for their metrics.
// - Not restarted: a configuration error (a worker or the engine keeper
//   exits kExitConfig: returns it), checkpoints that cannot be written
//   (kExitCheckpointFailed), a failure a worker found unrecoverable
//   (recovery::kExitUnrecoverable, or kExitUsage), more than max_restarts
//   restarts, fewer than min_nodes nodes left, or engines that cannot be
//   kept running.
// - SIGINT / SIGTERM: forwarded; the workers save and exit, and the run
//   ends with kExitOk (continue it with --resume).
// Every decision is said on stderr, prefixed "hyctl train: ".
//
// Thread-safety: call from the main thread of a single-threaded process
// (it forks, and installs signal handlers while the workers run).

#ifndef HY_LAUNCHER_SUPERVISOR_H_
#define HY_LAUNCHER_SUPERVISOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hy/common/status.h"
#include "hy/trainer/config/config.h"

namespace hy::launcher {

// The environment variable that carries the effective config (YAML) to
// every worker.
inline constexpr const char* kConfigEnv = "HY_TRAIN_CONFIG_YAML";

struct SuperviseOptions {
  // The workers' command line, argv[0] first, run as /proc/self/exe
  // (hyctl: its own command line and --worker).
  std::vector<std::string> worker_argv;
  // Whether the run continues the one under c.checkpoint.store_root.
  bool resume = false;
  // Resuming from this committed step (>= 0) rather than the newest:
  // RollBackTo(store root, from_step, drop_newer) before anything starts.
  int64_t from_step = -1;
  bool drop_newer = false;
  int max_restarts = 3;  // Restarts after which it gives up.
  int min_nodes = 1;     // Nodes below which it does not restart.
};

// Runs the training `c` to its end under supervision; returns the exit
// code (kExitOk when the run finished, or was stopped by a signal after
// the workers saved).
// An empty options.worker_argv is InvalidArgument (kExitUsage).
int Supervise(const trainer::TrainConfig& c, const SuperviseOptions& options);

// Whether the config can run on this machine, before a worker starts: its
// device (trainer::ChooseDevice), every data file readable, the tokenizer
// of a dataset run loadable. Returns InvalidArgument (a configuration
// error) naming the key and the file. The prompts themselves are parsed by
// the workers, which report a bad record the same way.
Status CheckRunnable(const trainer::TrainConfig& c);

// For a resume, before anything is created: `c`'s store root must be a run
// root (recovery::RunRoot::Open) with a committed step, below
// trainer.total_iterations. Returns NotFound when the root does not exist,
// is no run root or has nothing committed; InvalidArgument for a single
// store or a run that has reached trainer.total_iterations already. Other
// errors of reading the root are left to the workers' recovery.
Status CheckResume(const trainer::TrainConfig& c);

// For a resume from an earlier step: `step` must be recoverable under
// `root` (NotFound otherwise). Steps after it would be an abandoned branch
// that a restart goes back to (versions order by step), so with
// `drop_newer` they are removed from every store first (said on stderr);
// without it their presence is InvalidArgument naming them. Opens the
// stores for writing only to drop.
Status RollBackTo(const std::string& root, uint64_t step, bool drop_newer);

}  // namespace hy::launcher

#endif  // HY_LAUNCHER_SUPERVISOR_H_
