// CrashPoint: a test hook that ends the process at a named point of a
// commit protocol, as a kill -9 would (_exit, nothing flushed), so that a
// test can check what the next reader and the next run find there.
//
// Armed by the environment, in builds with HY_TEST_HOOKS (the default; a
// packaged build turns it off and every point compiles to nothing):
//   HY_TEST_CRASH_AT=<point>[:<rank>[:<step>]]
// fires at <point> on every rank or only on <rank>, at any step or only at
// <step>, in the first start of a job only (HY_RESTART_COUNT unset or 0),
// so that a restarted worker does not die at the same place again. The
// process exits with kCrashPointExit. Python's points are in
// python/hystate/_crash.py (the same variable).
//
// Points: recovery/transport_commit.cc (the trainer's commit):
//   commit.prepared       this rank's part is prepared, no vote yet
//   commit.decided        rank 0: its store committed (the decision), the
//                         others not told
//   commit.before_follow  rank > 0: told commit, not committed here
//   commit.followed       rank > 0: committed here
// recovery/replicator.cc (the copies of a committed part on other nodes):
//   replicate.prepared    the holder's copy is written, not committed
//   replicate.committed   the holder's copy is committed
//
// Thread-safety: any thread.

#ifndef HY_COMMON_CRASH_POINT_H_
#define HY_COMMON_CRASH_POINT_H_

#include <cstdint>

namespace hy {

inline constexpr int kCrashPointExit = 86;

#ifdef HY_TEST_HOOKS
// Ends the process if HY_TEST_CRASH_AT names this point (see above).
void CrashPoint(const char* point, int rank, int64_t step);
#else
inline void CrashPoint(const char*, int, int64_t) {}
#endif

}  // namespace hy

#endif  // HY_COMMON_CRASH_POINT_H_
