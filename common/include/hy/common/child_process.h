// ChildProcess: a helper program hy runs beside itself and talks to (the
// chat-template renderer, a Python reward's worker): started with
// posix_spawnp, its stdin and stdout pipes to this process (or stdout to a
// file), its stderr inherited or sent to a file, and PYTHONPATH led by a
// given directory.
//
// Ownership: the object owns the child. Destroying it closes the child's
// stdin and waits for it; a child still running 5 s later is killed.
//
// Thread-safety: not thread-safe; callers serialize WriteLine / ReadLine.

#ifndef HY_COMMON_CHILD_PROCESS_H_
#define HY_COMMON_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"

namespace hy {

struct ChildOptions {
  std::vector<std::string> argv;  // argv[0] is found on PATH if bare.
  std::string pythonpath_first;   // Put first on PYTHONPATH ("": as is).
  bool pipe_stdin = false;        // Else stdin is /dev/null.
  bool pipe_stdout = false;       // Else stdout goes where stderr does.
  std::string stderr_file;        // "": inherited (this process's).
};

class ChildProcess {
 public:
  // Starts the child. Returns FailedPrecondition naming argv[0] and the
  // system's error when it cannot start.
  // REQUIRES: !options.argv.empty().
  static Result<std::unique_ptr<ChildProcess>> Start(
      const ChildOptions& options);

  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Writes `line` and a newline to the child's stdin. Returns Unavailable
  // when the child is gone. REQUIRES: started with pipe_stdin.
  Status WriteLine(std::string_view line);

  // The next line of the child's stdout, without its newline. Returns
  // Unavailable when the child closed it (exited) first. REQUIRES: started
  // with pipe_stdout.
  Result<std::string> ReadLine();

  // Closes stdin and waits for the child; its exit status, or -1 when a
  // signal ended it. Later calls return the same.
  int Wait();

 private:
  ChildProcess(pid_t pid, int in_fd, int out_fd)
      : pid_(pid), in_fd_(in_fd), out_fd_(out_fd) {}

  pid_t pid_;
  int in_fd_;   // -1: none or closed.
  int out_fd_;  // -1: none.
  std::string buffer_;  // Read from out_fd_, not yet returned.
  bool waited_ = false;
  int status_ = -1;
};

}  // namespace hy

#endif  // HY_COMMON_CHILD_PROCESS_H_
