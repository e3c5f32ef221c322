// hy_reshard_c10d_worker: one rank of a c10d test job (see worker.h).
//
//   hy_reshard_c10d_worker --scenario NAME --rank R --world W --port P
//                          [--timeout-ms T]
//
// Exit status: 0 when the scenario held on this rank, 1 when it did not
// (the reason on stderr), 2 for bad arguments, 75 (EX_TEMPFAIL) when this
// rank was to host the store and its port was taken (the test retries).

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "worker.h"

namespace hy::reshard::testing {
namespace {

bool ParseArgs(int argc, char** argv, WorkerArgs* args) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--scenario") {
      args->scenario = value;
    } else if (flag == "--rank") {
      args->rank = std::atoi(value);
    } else if (flag == "--world") {
      args->world = std::atoi(value);
    } else if (flag == "--port") {
      args->port = std::atoi(value);
    } else if (flag == "--timeout-ms") {
      args->timeout_ms = std::atoll(value);
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && !args->scenario.empty();
}

Status Dispatch(const WorkerArgs& args) {
  if (args.scenario == "alltoallv") return RunAllToAllV(args);
  if (args.scenario == "from_env") return RunFromEnv(args);
  if (args.scenario == "collective_timeout") return RunCollectiveTimeout(args);
  if (args.scenario == "connect_timeout") return RunConnectTimeout(args);
  if (args.scenario == "peer_exits") return RunPeerExits(args);
  if (args.scenario == "reshard_round_trip") return RunReshardRoundTrip(args);
  if (args.scenario == "sparse_delta") return RunSparseDelta(args);
  return Status::InvalidArgument("unknown scenario " + args.scenario);
}

}  // namespace
}  // namespace hy::reshard::testing

int main(int argc, char** argv) {
  hy::reshard::testing::WorkerArgs args;
  if (!hy::reshard::testing::ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: %s --scenario NAME --rank R --world W "
                 "--port P [--timeout-ms T]\n",
                 argv[0]);
    return 2;
  }
  const hy::Status status = hy::reshard::testing::Dispatch(args);
  if (status.ok()) return 0;
  std::fprintf(stderr, "[rank %d] %s: %s\n", args.rank, args.scenario.c_str(),
               status.ToString().c_str());
  // A store port someone else took between the test choosing it and rank 0
  // binding it: the test picks another.
  if (args.rank == 0 && status.code() == hy::StatusCode::kUnavailable &&
      std::strstr(std::string(status.message()).c_str(), "in use") != nullptr) {
    return 75;
  }
  return 1;
}
