// Shared-memory segments a killed vLLM engine leaves behind.
//
// vLLM's processes talk through POSIX shared memory that Python's
// multiprocessing creates by name under /dev/shm (psm_* for its message
// queues' ring buffers, hundreds of MB each, sem.mp-* for its locks) and
// unlinks only when they shut down cleanly. An engine killed with SIGKILL
// (the keeper kills what is left of a dead engine's process group, rank 0
// kills a hung one) leaves them there: a week-long run whose engines die
// now and then would fill /dev/shm, and the next engine would fail to
// start. So the keeper records the segments an engine's process group maps
// while it runs, and unlinks them once the group is gone.
//
// Only names with one of those prefixes are taken (never the run's weight
// file, which outlives an engine), and a segment that some live process
// still maps is never unlinked.
//
// Thread-safety: free functions over /proc and the directory; no state.

#ifndef HY_LAUNCHER_SHM_SEGMENTS_H_
#define HY_LAUNCHER_SHM_SEGMENTS_H_

#include <sys/types.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

namespace hy::launcher {

// Python multiprocessing's segment name prefixes: shared_memory's and its
// semaphores'.
inline const std::vector<std::string>& ShmPrefixes() {
  static const std::vector<std::string> kPrefixes = {"psm_", "sem.mp-"};
  return kPrefixes;
}

// The names (without directory) of the segments under `dir` whose names
// start with one of `prefixes` that a process of process group `pgid`
// maps now. Processes that vanish while being read are skipped.
std::set<std::string> GroupShmSegments(
    pid_t pgid, const std::string& dir = "/dev/shm",
    const std::vector<std::string>& prefixes = ShmPrefixes());

// Waits up to `wait` for process group `pgid` to have no process left
// (zombies count as gone); true if it has none.
bool WaitGroupGone(pid_t pgid, std::chrono::milliseconds wait);

// Unlinks each of `names` under `dir` that no live process maps; returns
// those it unlinked (a name already gone is neither an error nor listed).
std::vector<std::string> ReclaimShmSegments(
    const std::set<std::string>& names, const std::string& dir = "/dev/shm");

}  // namespace hy::launcher

#endif  // HY_LAUNCHER_SHM_SEGMENTS_H_
