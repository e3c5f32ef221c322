// The worker launcher under the supervisor (supervisor.h; `hyctl train`
// without RANK): starts N worker processes on this
// machine the way torchrun --standalone does (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT, OMP_NUM_THREADS=1),
// forwards their output, and stops them all when one fails.
//
// Output: rank 0's stdout is copied to the launcher's stdout as is (the
// report lines); everything else (every rank's stderr, the other ranks'
// stdout) goes to the launcher's stderr, line by line, prefixed with
// "[rank r] ".
//
// Failure: when a worker exits non-zero or is killed, the others get
// SIGTERM, then SIGKILL after a grace period; SIGINT / SIGTERM sent to the
// launcher are forwarded to the workers the same way. Signals that arrive
// within kStopRepeatSeconds of the first are that same stop delivered
// again (a terminal's Ctrl-C and Slurm's scancel signal every process of
// the job, a user presses Ctrl-C twice): absorbed, by the launcher and by
// the workers alike; one after that kills. Workers get PR_SET_PDEATHSIG,
// so they die with a launcher that is killed outright. Workers start with
// SIGINT and SIGTERM blocked (the exec keeps the mask): hyctl's worker
// unblocks them once its handlers are in place, so a stop during start-up
// is delivered then instead of killing a worker half started.
//
// Thread-safety: call RunLauncher from a single-threaded process (it forks,
// and installs SIGINT / SIGTERM / SIGCHLD handlers while it runs).

#ifndef HY_LAUNCHER_WORKER_LAUNCHER_H_
#define HY_LAUNCHER_WORKER_LAUNCHER_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "hy/common/result.h"

namespace hy::launcher {

// Stop signals within this many seconds of the first are the same stop.
inline constexpr int kStopRepeatSeconds = 3;

struct LaunchOptions {
  int nproc = 1;
  std::string executable = "/proc/self/exe";
  std::vector<std::string> argv;  // The workers' argv, argv[0] first.
  // Added to (or replacing in) the launcher's environment, besides the
  // torchrun variables above.
  std::vector<std::pair<std::string, std::string>> env;
  int master_port = 0;
  // After SIGINT / SIGTERM to the launcher (forwarded to the workers, which
  // then save and exit), how long they get before SIGKILL.
  double stop_grace_seconds = 120;
  // HY_NODE_ID of each rank (empty: not set).
  std::vector<int> node_ids;
  // After the first failure, how long the other workers get to notice it
  // and exit by themselves (recovery::kExitPeerFailed) before they are
  // killed (SIGKILL: a SIGTERM would ask them to save, which a job that
  // lost a rank cannot). 0: at once. Workers that are all stopped
  // (SIGSTOP: a hung rank) are killed at once: they cannot exit.
  double peer_exit_seconds = 0;
  // A child of this process that is not a worker but that the run needs
  // (the vLLM engine keeper): its exit stops the workers as a worker's
  // failure does (LaunchResult::first_failed kWatchedFailed). -1: none.
  pid_t watch_pid = -1;
  std::string watch_name;
};

// LaunchResult::first_failed when the watched process exited first.
inline constexpr int kWatchedFailed = -2;

// How each worker ended.
struct LaunchResult {
  std::vector<int> wait_status;  // Per rank, as waitpid gave it.
  int first_failed = -1;         // The rank that failed first, or -1.
  int watch_status = -1;         // The watched process's, if it exited.
  // From the first failure until every worker had exited.
  double stop_seconds = 0;
  // The signal that stopped the launcher when every worker then exited 0
  // (saved and stopped); 0 otherwise.
  int stopped_by = 0;
};

// Returns a TCP port on 127.0.0.1 that was free a moment ago (bound, then
// closed), or IOError. It is taken below the ephemeral range
// (EphemeralPortsFrom(), from half its start up), which the kernel never
// hands out by itself, so no other process's outgoing connection takes it
// before its user binds it; a port of that range only if 64 tries below
// it found none free.
Result<int> PickFreePort();

// The first port of the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range; 32768 if unreadable).
int EphemeralPortsFrom();

// The command line of this process (/proc/self/cmdline), or IOError.
Result<std::vector<std::string>> SelfCommandLine();

// Runs the workers until all have exited. Returns OK (*exit_code 0) when
// every one exited 0. Otherwise returns Aborted naming the first rank that
// failed and how ("rank 1 exited with status 1", "rank 0 was killed by
// signal 9 (Killed)"), with *exit_code that rank's exit status (1 if it was
// killed); Aborted naming the signal that stopped the launcher (*exit_code
// 1); IOError if a worker cannot be started (the others are stopped).
Status RunLauncher(const LaunchOptions& options, int* exit_code,
                   LaunchResult* result = nullptr);

}  // namespace hy::launcher

#endif  // HY_LAUNCHER_WORKER_LAUNCHER_H_
