// The launcher side of `hyctl train` (RANK not set): supervises a run's
// workers on this machine.
//
// Before anything starts it checks what can be checked here: that the
// rollout's TP size divides the workers, that the config can run on this
// machine (CheckRunnable, else exit 78), and for --resume that the run has
// a committed step below trainer.total_iterations (CheckResume), rolling
// back to --from-step first (RollBackTo). It then picks the run's id (the
// environment's, the stores' when resuming, else a new one) and a node per
// worker, and starts the workers (train_launcher.h), each with the
// effective config in HY_TRAIN_CONFIG_YAML.
//
// After a failure it restarts them on the surviving nodes: a node is lost
// when its directory is gone (a machine and its disk); a worker that died
// on a node whose directory is still there is restarted on it (a process
// crash). It does not restart after a configuration error (exit 78),
// checkpoints that cannot be written (exit 74), a failure a worker found
// unrecoverable, --max-restarts restarts, or when
// fewer than --min-nodes nodes are left. A SIGINT / SIGTERM stops the run
// after the workers save.
//
// Thread-safety: call from hyctl's main thread, single-threaded (it forks).

#ifndef HY_CLI_TRAIN_SUPERVISOR_H_
#define HY_CLI_TRAIN_SUPERVISOR_H_

#include "hy/trainer/config/config.h"
#include "train_config.h"

namespace hy::cli {

// Runs the training `c` to its end under supervision; returns hyctl's exit
// code (0 when the run finished or was stopped by a signal after saving).
int SuperviseTraining(const trainer::TrainConfig& c, const TrainFlags& f);

}  // namespace hy::cli

#endif  // HY_CLI_TRAIN_SUPERVISOR_H_
