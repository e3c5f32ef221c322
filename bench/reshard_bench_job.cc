#include "reshard_bench_job.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "hy/reshard/c10d_transport.h"

namespace hy::bench {

using reshard::C10dStoreServer;

int ParseReshardFlags(int argc, char** argv, ReshardFlags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(64);
      }
      return argv[++i];
    };
    if (a == "--json") {
      flags->json = true;
    } else if (a == "--size-mib") {
      flags->size_mib = std::stoll(next());
    } else if (a == "--reps") {
      flags->reps = std::max(1, std::stoi(next()));
    } else if (a == "--bucket-mib") {
      flags->bucket_mib = std::max<int64_t>(1, std::stoll(next()));
    } else if (a == "--worker") {
      flags->worker = true;
    } else if (a == "--rank") {
      flags->rank = std::stoi(next());
    } else if (a == "--port") {
      flags->port = std::stoi(next());
    } else if (a == "--learn-link") {
      flags->learn_link = true;
    } else if (a == "--link-gbps") {
      flags->link_gbps = std::stod(next());
    } else if (a == "--hosts") {
      std::stringstream in(next());
      for (std::string item; std::getline(in, item, ',');) {
        const size_t eq = item.find('=');
        if (eq == std::string::npos) {
          std::fprintf(stderr, "--hosts: NS=ADDR,NS=ADDR\n");
          return 64;
        }
        flags->host_ns.push_back(item.substr(0, eq));
        flags->host_addr.push_back(item.substr(eq + 1));
      }
      if (flags->host_ns.size() != 2) {
        std::fprintf(stderr, "--hosts: two hosts (2 ranks each)\n");
        return 64;
      }
    } else {
      std::fprintf(stderr,
                   "usage: hy_bench_reshard [--json] [--size-mib N] "
                   "[--reps N] [--bucket-mib N] [--hosts NS0=ADDR0,NS1=ADDR1]"
                   " [--learn-link] [--link-gbps G]\n");
      return a == "--help" ? 0 : 64;
    }
  }
  return -1;
}

int RunReshardJob(const ReshardFlags& flags) {
  auto server = C10dStoreServer::Start(0);
  if (!server.ok()) {
    std::fprintf(stderr, "hy_bench_reshard: %s\n",
                 server.status().ToString().c_str());
    return 1;
  }
  std::vector<pid_t> pids;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) {
    std::perror("hy_bench_reshard: /proc/self/exe");
    return 1;
  }
  self[n] = '\0';
  for (int r = 0; r < kReshardWorld; ++r) {
    std::vector<std::string> args;
    const int host = r / RanksPerNode(flags);
    if (host > 0 && !flags.host_ns.empty()) {  // Another host's namespace.
      args = {"/usr/sbin/ip", "netns", "exec", flags.host_ns[host]};
    }
    for (const std::string& a :
         {std::string(self), std::string("--worker"), std::string("--rank"),
          std::to_string(r), std::string("--port"),
          std::to_string((*server)->port()), std::string("--size-mib"),
          std::to_string(flags.size_mib), std::string("--reps"),
          std::to_string(flags.reps), std::string("--bucket-mib"),
          std::to_string(flags.bucket_mib)}) {
      args.push_back(a);
    }
    if (flags.json) args.push_back("--json");
    if (flags.learn_link) args.push_back("--learn-link");
    if (flags.link_gbps > 0) {
      args.push_back("--link-gbps");
      args.push_back(std::to_string(flags.link_gbps));
    }
    if (!flags.host_ns.empty()) {
      std::string spec;
      for (size_t h = 0; h < flags.host_ns.size(); ++h) {
        spec += (h ? "," : "") + flags.host_ns[h] + "=" + flags.host_addr[h];
      }
      args.push_back("--hosts");
      args.push_back(spec);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (pid < 0) {
      std::perror("hy_bench_reshard: fork");
      for (pid_t other : pids) kill(other, SIGKILL);
      return 1;
    }
    pids.push_back(pid);
  }
  // The first rank to fail ends the job: the others would only wait for it
  // until their collectives time out.
  int rc = 0;
  std::vector<pid_t> running = pids;
  while (!running.empty()) {
    int status = 0;
    const pid_t pid = wait(&status);
    if (pid < 0) return 1;
    running.erase(std::remove(running.begin(), running.end(), pid),
                  running.end());
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    rc = 1;
    for (pid_t other : running) kill(other, SIGKILL);
  }
  return rc;
}

}  // namespace hy::bench
