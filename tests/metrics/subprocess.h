// Test support: temporary directories, child processes (real prometheus,
// promtool, prometheus-pushgateway, hyctl) that are always reaped, and
// loopback ports reserved for the life of an object.
//
// There is deliberately no "find a free port" helper: a port that was free a
// moment ago can be taken by any other process (tests run in parallel) before
// it is used. Servers are started on port 0 and their port is read back
// (ChildProcess::ListeningPort); a port that must refuse connections is held
// by a ReservedPort.
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

// A TCP port on 127.0.0.1 that is bound but not listening for as long as
// this object lives: connections to it are refused, and no other process can
// bind it meanwhile.
class ReservedPort {
 public:
  // Returns kIOError if no socket can be bound.
  static Result<std::unique_ptr<ReservedPort>> Create();
  ~ReservedPort();
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;

  int port() const { return port_; }

 private:
  ReservedPort(int fd, int port) : fd_(fd), port_(port) {}
  int fd_;
  int port_;
};

struct ProcessResult {
  int exit_code = -1;  // -1 if killed by a signal.
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv[0] (a path) with `input` on stdin, collecting stdout and stderr,
// killing it after timeout_ms. Returns kInternal if it cannot be started
// (including an argv[0] that cannot be executed).
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const std::string& input, int timeout_ms);

// A long-running child (a server) with stdout and stderr in a log file.
class ChildProcess {
 public:
  // Starts argv[0] (a path) and returns once the child runs it (so it holds
  // none of this process's descriptors any more). Returns kInternal if it
  // cannot be started (fork fails, the log cannot be opened, exec fails).
  static Result<std::unique_ptr<ChildProcess>> Spawn(
      const std::vector<std::string>& argv, const std::string& log_path);
  // Stops the child: SIGTERM, then SIGKILL after 5 s.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // True while the child has not exited.
  bool Running();
  pid_t pid() const { return pid_; }
  // The TCP port of a socket the child listens on (IPv4 or IPv6, any
  // address), read from /proc; 0 while it has none (or has exited). Only
  // the child's own sockets count: Spawn returns after the exec. For a
  // server started on port 0, this is the port the kernel gave it: no other
  // process can hold it, unlike a port picked before the server started.
  int ListeningPort() const;
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
