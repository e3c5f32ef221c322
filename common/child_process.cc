// ChildProcess (child_process.h).

#include "hy/common/child_process.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

extern char** environ;

namespace hy {
namespace {

// This process's environment with PYTHONPATH led by `first`.
std::vector<std::string> ChildEnvironment(const std::string& first) {
  std::vector<std::string> env;
  std::string pythonpath;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PYTHONPATH=", 11) == 0) {
      pythonpath = *e + 11;
    } else {
      env.emplace_back(*e);
    }
  }
  if (!first.empty()) {
    pythonpath = pythonpath.empty() ? first : first + ":" + pythonpath;
  }
  if (!pythonpath.empty()) env.push_back("PYTHONPATH=" + pythonpath);
  return env;
}

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const ChildOptions& options) {
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  if ((options.pipe_stdin && ::pipe2(in, O_CLOEXEC) != 0) ||
      (options.pipe_stdout && ::pipe2(out, O_CLOEXEC) != 0)) {
    const int err = errno;
    for (int fd : {in[0], in[1], out[0], out[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return Status::FailedPrecondition(std::string("pipe: ") +
                                      std::strerror(err));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (options.pipe_stdin) {
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                     O_RDONLY, 0);
  }
  if (!options.stderr_file.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO,
                                     options.stderr_file.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  if (options.pipe_stdout) {
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  } else {
    posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  }
  std::vector<std::string> env = ChildEnvironment(options.pythonpath_first);
  std::vector<std::string> argv = options.argv;
  std::vector<char*> envp, args;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr,
                                args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (in[0] >= 0) ::close(in[0]);
  if (out[1] >= 0) ::close(out[1]);
  if (rc != 0) {
    if (in[1] >= 0) ::close(in[1]);
    if (out[0] >= 0) ::close(out[0]);
    return Status::FailedPrecondition(options.argv[0] +
                                      " cannot start: " + std::strerror(rc));
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, in[1], out[0]));
}

ChildProcess::~ChildProcess() {
  CloseFd(&in_fd_);
  if (!waited_) {
    // A child that does not end on its own (stdin closed) is killed.
    for (int i = 0; i < 500 && !waited_; ++i) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_ || r < 0) {
        waited_ = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!waited_) {
      ::kill(pid_, SIGKILL);
      Wait();
    }
  }
  CloseFd(&out_fd_);
}

Status ChildProcess::WriteLine(std::string_view line) {
  std::string data(line);
  data.push_back('\n');
  // A child that is gone would raise SIGPIPE, which ends this process by
  // default: block it for this thread and take a pending one back.
  sigset_t pipe_set, old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  size_t done = 0;
  int err = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(in_fd_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EPIPE;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (err == EPIPE) {
    const struct timespec zero = {0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  if (err != 0) {
    return Status::Unavailable(std::string("the child's stdin: ") +
                               std::strerror(err));
  }
  return Status::OK();
}

Result<std::string> ChildProcess::ReadLine() {
  while (true) {
    const size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    char chunk[65536];
    const ssize_t n = ::read(out_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Unavailable("the child closed its stdout");
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

int ChildProcess::Wait() {
  CloseFd(&in_fd_);
  if (waited_) return status_;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) {
      waited_ = true;
      return status_;
    }
  }
  waited_ = true;
  status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return status_;
}

}  // namespace hy
