// hy_bench_reshard's job (reshard_bench.cc measures): its flags, and the
// process that hosts the c10d store and starts the 4 ranks as copies of the
// binary, on this host or, with --hosts, 2 in each of two network
// namespaces (scripts/bench-reshard-link.sh makes them).
//
// Thread-safety: one thread (the job forks; the ranks are processes).

#ifndef HY_BENCH_RESHARD_BENCH_JOB_H_
#define HY_BENCH_RESHARD_BENCH_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

namespace hy::bench {

inline constexpr int kReshardWorld = 4;

struct ReshardFlags {
  bool json = false;
  std::vector<std::string> host_ns, host_addr;  // --hosts; empty: local.
  bool learn_link = false;
  double link_gbps = 0;
  int64_t size_mib = 256;
  int reps = 3;
  int64_t bucket_mib = 64;
  bool worker = false;
  int rank = 0;
  int port = 0;
};

// Ranks per node of the plan's topology: 2 with --hosts, else all 4.
inline int RanksPerNode(const ReshardFlags& f) {
  return f.host_ns.empty() ? kReshardWorld : 2;
}

// Parses argv into *flags. Returns -1 to go on, else the exit code (0 for
// --help, 64 for bad usage, having said why on stderr).
int ParseReshardFlags(int argc, char** argv, ReshardFlags* flags);

// Hosts the store, runs kReshardWorld copies of this binary as the ranks
// (--worker) and returns 0 if all of them succeed; the first to fail ends
// the job.
int RunReshardJob(const ReshardFlags& flags);

}  // namespace hy::bench

#endif  // HY_BENCH_RESHARD_BENCH_JOB_H_
