#include "reshard_bench_job.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "hy/reshard/c10d_transport.h"

namespace hy::bench {

using reshard::C10dStoreServer;

int ParseReshardFlags(int argc, char** argv, ReshardFlags* flags) {
  CLI::App app(
      "fsdp=4 -> tp=2,dp=2 resharding between 4 processes over Gloo, beside "
      "memcpy and a plain all-gather of the same bytes",
      "hy_bench_reshard");
  AddJsonFlag(&app, &flags->json);
  app.add_option("--size-mib", flags->size_mib, "Model size in MiB")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--reps", flags->reps, "Repetitions (the best counts)")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--bucket-mib", flags->bucket_mib, "Exchange bucket in MiB")
      ->capture_default_str()
      ->check(AtLeast(1));
  std::vector<std::string> hosts;
  app.add_option("--hosts", hosts,
                 "Two hosts of 2 ranks each: NS0=ADDR0,NS1=ADDR1 (network "
                 "namespaces and their addresses)")
      ->delimiter(',')
      ->expected(2);
  app.add_flag("--learn-link", flags->learn_link,
               "Learn the link's speed from the exchanges");
  app.add_option("--link-gbps", flags->link_gbps,
                 "The link's speed in Gb/s (0: the executor's constant)")
      ->capture_default_str()
      ->check(AtLeast(0));
  // The ranks' own flags (RunReshardJob passes them).
  app.add_flag("--worker", flags->worker)->group("");
  app.add_option("--rank", flags->rank)->group("");
  app.add_option("--port", flags->port)->group("");
  if (int code = ParseFlags(&app, argc, argv); code >= 0) return code;
  for (const std::string& item : hosts) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      std::fprintf(stderr, "hy_bench_reshard: --hosts %s: give NS=ADDR\n",
                   item.c_str());
      return kExitUsage;
    }
    flags->host_ns.push_back(item.substr(0, eq));
    flags->host_addr.push_back(item.substr(eq + 1));
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
