// The worker process of the c10d tests: one rank of a multi-process Gloo
// job, started by c10d_test.cc (fork + exec) once per rank. Each scenario
// runs the same code on every rank and returns OK or a Status saying what
// did not hold on this rank; main turns that into the exit code.

#ifndef HY_TESTS_RESHARD_C10D_WORKER_H_
#define HY_TESTS_RESHARD_C10D_WORKER_H_

#include <cstdint>
#include <string>

#include "hy/common/status.h"

namespace hy::reshard::testing {

struct WorkerArgs {
  std::string scenario;
  int rank = 0;
  int world = 1;
  int port = 0;  // Of the store the test process hosts.
  int64_t timeout_ms = 60000;
};

// Returns InternalError with `what` unless `cond`.
inline Status Check(bool cond, const std::string& what) {
  return cond ? Status::OK() : Status::Internal("check failed: " + what);
}

// Transport scenarios (worker_transport.cc).
Status RunAllToAllV(const WorkerArgs& args);
Status RunFromEnv(const WorkerArgs& args);
Status RunCollectiveTimeout(const WorkerArgs& args);
Status RunPeerExits(const WorkerArgs& args);
Status RunConnectTimeout(const WorkerArgs& args);

// Executor scenarios over Gloo (worker_reshard.cc).
Status RunReshardRoundTrip(const WorkerArgs& args);
Status RunSparseDelta(const WorkerArgs& args);

}  // namespace hy::reshard::testing

#endif  // HY_TESTS_RESHARD_C10D_WORKER_H_
