// Test support: temporary directories, child processes (real prometheus,
// promtool, prometheus-pushgateway, hyctl) that are always reaped, and free
// loopback ports.
//
// A ChildProcess is killed when its owner is destroyed (so a failing test
// never leaves a server behind) and, via PR_SET_PDEATHSIG, when the test
// process itself dies.

#ifndef HY_TESTS_METRICS_SUBPROCESS_H_
#define HY_TESTS_METRICS_SUBPROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "hy/common/result.h"

namespace hy::metrics::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Returns the full path of `name` found in $PATH (or /usr/bin, /usr/sbin),
// or "" if there is none.
std::string FindExecutable(const std::string& name);

// The message tests fail with when a required binary is missing.
std::string MissingBinaryMessage(const std::string& binary,
                                 const std::string& package);

// Returns a TCP port on 127.0.0.1 that was free a moment ago.
Result<int> FreeLoopbackPort();

struct ProcessResult {
  int exit_code = -1;  // -1 if killed by a signal.
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv[0] (a path) with `input` on stdin, collecting stdout and stderr,
// killing it after timeout_ms. Returns kInternal if it cannot be started.
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const std::string& input, int timeout_ms);

// A long-running child (a server) with stdout and stderr in a log file.
class ChildProcess {
 public:
  // Starts argv[0] (a path). Returns kInternal if fork fails.
  static Result<std::unique_ptr<ChildProcess>> Spawn(
      const std::vector<std::string>& argv, const std::string& log_path);
  // Stops the child: SIGTERM, then SIGKILL after 5 s.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // True while the child has not exited.
  bool Running();
  pid_t pid() const { return pid_; }
  // The last `max_bytes` of the log.
  std::string LogTail(size_t max_bytes = 4000) const;

 private:
  ChildProcess(pid_t pid, std::string log_path)
      : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_;
  bool reaped_ = false;
  std::string log_path_;
};

// Reads a whole file; "" if it cannot be read.
std::string ReadFile(const std::string& path);
// Writes a whole file. Returns kIOError on failure.
Status WriteFile(const std::string& path, const std::string& data);

}  // namespace hy::metrics::testing

#endif  // HY_TESTS_METRICS_SUBPROCESS_H_
