// The worker launcher with real processes (/bin/sh workers): the
// environment torchrun would give them, rank 0's stdout as the launcher's
// and every other line prefixed on stderr, a failing worker stopping the
// others, a watched process doing the same, and exit codes.

#include "hy/launcher/worker_launcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hy/launcher/exit_codes.h"
#include "testing/temp_dir.h"

namespace hy::launcher {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

LaunchOptions Shell(int nproc, const std::string& script) {
  LaunchOptions o;
  o.nproc = nproc;
  o.executable = "/bin/sh";
  o.argv = {"sh", "-c", script};
  return o;
}

// RunLauncher with the launcher's stdout and stderr in files.
struct Launched {
  Status status;
  int exit_code = -1;
  LaunchResult result;
  std::string out, err;
  double seconds = 0;
};

Launched Launch(const LaunchOptions& o, const TempDir& dir) {
  Launched r;
  const std::string out = dir.path() + "/launcher.out";
  const std::string err = dir.path() + "/launcher.err";
  fflush(stdout);
  fflush(stderr);
  const int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
  const int fo = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int fe = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fo, STDOUT_FILENO);
  dup2(fe, STDERR_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  r.status = RunLauncher(o, &r.exit_code, &r.result);
  r.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  dup2(saved_out, STDOUT_FILENO);
  dup2(saved_err, STDERR_FILENO);
  for (int fd : {fo, fe, saved_out, saved_err}) close(fd);
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

TEST(WorkerLauncherTest, WorkersGetTorchrunsEnvironmentAndTheirOutputIsSorted) {
  TempDir dir;
  LaunchOptions o = Shell(
      3,
      "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR "
      "$MASTER_PORT $HY_NODE_ID $OMP_NUM_THREADS $EXTRA\" > " +
          dir.path() + "/rank$RANK; echo report $RANK; echo log $RANK >&2");
  o.env = {{"EXTRA", "x"}};
  o.node_ids = {5, 6, 7};
  o.master_port = 12345;
  const Launched r = Launch(o, dir);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString() << r.err;
  EXPECT_EQ(r.exit_code, kExitOk);
  EXPECT_EQ(r.result.first_failed, -1);
  ASSERT_EQ(r.result.wait_status.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    const int st = r.result.wait_status[rank];
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << rank;
    const std::string k = std::to_string(rank);
    EXPECT_EQ(Slurp(dir.path() + "/rank" + k),
              k + " 3 " + k + " 3 127.0.0.1 12345 " + std::to_string(5 + rank) +
                  " 1 x\n");
    // Rank 0's stdout is the launcher's, as is; the rest goes to stderr,
    // a line at a time, prefixed.
    EXPECT_NE(r.err.find("[rank " + k + "] log " + k + "\n"), std::string::npos)
        << r.err;
  }
  EXPECT_EQ(r.out, "report 0\n");
  EXPECT_NE(r.err.find("[rank 1] report 1\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[rank 2] report 2\n"), std::string::npos) << r.err;
}

TEST(WorkerLauncherTest, AFailingWorkerStopsTheOthers) {
  TempDir dir;
  // Rank 1 fails at once; rank 0 would run for a minute.
  LaunchOptions o = Shell(
      2, "if [ \"$RANK\" = 1 ]; then sleep 0.3; exit 3; fi; exec sleep 60");
  const Launched r = Launch(o, dir);
  ASSERT_TRUE(r.status.code() == StatusCode::kAborted) << r.status.ToString();
  EXPECT_NE(r.status.message().find("rank 1 exited with status 3"),
            std::string::npos)
      << r.status.ToString();
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.result.first_failed, 1);
  EXPECT_TRUE(WIFSIGNALED(r.result.wait_status[0]));
  EXPECT_LT(r.seconds, 30);  // Stopped, not waited for.
}

TEST(WorkerLauncherTest, AKilledWorkerIsNamedWithItsSignal) {
  TempDir dir;
  LaunchOptions o = Shell(2,
                          "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; "
                          "exec sleep 60");
  const Launched r = Launch(o, dir);
  ASSERT_TRUE(r.status.code() == StatusCode::kAborted) << r.status.ToString();
  EXPECT_NE(r.status.message().find("rank 0 was killed by signal 9"),
            std::string::npos)
      << r.status.ToString();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.result.first_failed, 0);
}

TEST(WorkerLauncherTest, TheWatchedProcessExitingStopsTheWorkers) {
  TempDir dir;
  const pid_t watched = fork();
  ASSERT_GE(watched, 0);
  if (watched == 0) {
    usleep(300 * 1000);
    _exit(7);
  }
  LaunchOptions o = Shell(2, "exec sleep 60");
  o.watch_pid = watched;
  o.watch_name = "the test's watched child";
  const Launched r = Launch(o, dir);
  ASSERT_TRUE(r.status.code() == StatusCode::kAborted) << r.status.ToString();
  EXPECT_EQ(r.result.first_failed, kWatchedFailed);
  EXPECT_TRUE(WIFEXITED(r.result.watch_status) &&
              WEXITSTATUS(r.result.watch_status) == 7);
  EXPECT_LT(r.seconds, 30);
}

TEST(WorkerLauncherTest, PickFreePortGivesABindablePort) {
  Result<int> port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  EXPECT_GT(*port, 1024);
  // Below the kernel's ephemeral range: no outgoing connection can take it.
  EXPECT_LT(*port, EphemeralPortsFrom());
  EXPECT_GE(*port, EphemeralPortsFrom() / 2);
}

}  // namespace
}  // namespace hy::launcher
