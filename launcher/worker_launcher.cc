#include "hy/launcher/worker_launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>

#include "hy/launcher/stop_signals.h"

extern char** environ;

namespace hy::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// Set by the signal handler; the main loop reads and clears them.
volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_signal_count = 0;
int g_wake_fd = -1;  // Write end of the self-pipe; the handler writes a byte.

void OnSignal(int sig) {
  const int saved = errno;
  if (sig != SIGCHLD) {
    g_signal = sig;
    g_signal_count = g_signal_count + 1;
  }
  if (g_wake_fd >= 0) {
    const char byte = 0;
    (void)!write(g_wake_fd, &byte, 1);
  }
  errno = saved;
}

// Installs OnSignal for SIGINT, SIGTERM and SIGCHLD; restores the old
// handlers on destruction.
class SignalScope {
 public:
  explicit SignalScope(int wake_fd) {
    g_signal = 0;
    g_signal_count = 0;
    g_wake_fd = wake_fd;
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < std::size(kSignals); ++i) {
      sa.sa_flags = SA_RESTART | (kSignals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
      sigaction(kSignals[i], &sa, &old_[i]);
    }
    // hyctl's main holds SIGINT and SIGTERM (HoldStopSignals); one that
    // came meanwhile is delivered to OnSignal now.
    ReleaseStopSignals();
  }
  ~SignalScope() {
    for (size_t i = 0; i < std::size(kSignals); ++i) {
      sigaction(kSignals[i], &old_[i], nullptr);
    }
    g_wake_fd = -1;
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGCHLD};
  struct sigaction old_[std::size(kSignals)];
};

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // Nowhere to write to; keep draining the workers.
    done += static_cast<size_t>(n);
  }
}

// One pipe from a worker: its stdout or its stderr.
struct Stream {
  int fd = -1;
  int rank = 0;
  bool plain = false;  // Rank 0's stdout: copied unprefixed to stdout.
  std::string partial;

  // Writes the complete lines of `partial` (all of it when `flush`).
  void Emit(bool flush) {
    size_t begin = 0;
    for (size_t nl; (nl = partial.find('\n', begin)) != std::string::npos;
         begin = nl + 1) {
      Line(partial.substr(begin, nl - begin));
    }
    partial.erase(0, begin);
    if ((flush && !partial.empty()) || partial.size() > (1 << 20)) {
      Line(partial);
      partial.clear();
    }
  }
  void Line(const std::string& line) const {
    if (plain) {
      WriteAll(STDOUT_FILENO, line + "\n");
    } else {
      WriteAll(STDERR_FILENO,
               "[rank " + std::to_string(rank) + "] " + line + "\n");
    }
  }
};

struct Child {
  pid_t pid = -1;
  int rank = 0;
  bool running = false;
};

// Whether `pid` is stopped (SIGSTOP, a debugger): such a worker cannot
// notice a peer's failure and exit by itself.
bool IsStopped(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() &&
         (stat[paren + 2] == 'T' || stat[paren + 2] == 't');
}

std::string DescribeExit(int rank, int status) {
  std::string out = "rank " + std::to_string(rank);
  if (WIFEXITED(status)) {
    return out + " exited with status " + std::to_string(WEXITSTATUS(status));
  }
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return out + " was killed by signal " + std::to_string(sig) + " (" +
         strsignal(sig) + ")";
}

bool Failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status); }

// "NAME=value" for every variable of this process not in `set`, then `set`.
std::vector<std::string> Environment(
    const std::vector<std::pair<std::string, std::string>>& set) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string var = *e;
    bool replaced = false;
    for (const auto& [name, value] : set) {
      replaced = replaced || var.compare(0, name.size() + 1, name + "=") == 0;
    }
    if (!replaced) env.push_back(var);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

namespace {

// Binds a TCP socket to 127.0.0.1:port (0: the kernel picks); returns the
// port bound, closed again, or -1 with errno set.
int BindLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  int got = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    got = ntohs(addr.sin_port);
  }
  const int saved = errno;
  close(fd);
  errno = saved;
  return got;
}

}  // namespace

int EphemeralPortsFrom() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (in >> low >> high && low > 1024 && low <= 65535) return low;
  return 32768;  // Linux's default.
}

Result<int> PickFreePort() {
  // Below the range the kernel hands out itself: no other process's
  // connect() (Gloo's, the rendezvous') or bind to port 0 takes the port
  // between this pick and the bind that uses it, which for a vLLM engine's
  // server comes most of a minute later.
  const int high = EphemeralPortsFrom();
  const int low = std::max(1025, high / 2);
  if (low < high) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> pick(low, high - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      const int port = BindLoopback(pick(rng));
      if (port > 0) return port;
    }
  }
  const int port = BindLoopback(0);  // All tried were taken: any free one.
  if (port < 0) {
    return Status::IOError(std::string("cannot pick a free port on "
                                       "127.0.0.1: ") +
                           strerror(errno));
  }
  return port;
}

Result<std::vector<std::string>> SelfCommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  if (!in) return Status::IOError("cannot read /proc/self/cmdline");
  const std::string all((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  for (size_t b = 0; b < all.size();) {
    const size_t e = std::min(all.find('\0', b), all.size());
    argv.push_back(all.substr(b, e - b));
    b = e + 1;
  }
  if (argv.empty()) return Status::IOError("empty /proc/self/cmdline");
  return argv;
}

Status RunLauncher(const LaunchOptions& o, int* exit_code,
                   LaunchResult* result) {
  *exit_code = 0;
  LaunchResult local_result;
  LaunchResult& res = result != nullptr ? *result : local_result;
  res = LaunchResult();
  res.wait_status.assign(o.nproc, -1);
  std::optional<Clock::time_point> failed_at;
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::IOError(std::string("pipe: ") + strerror(errno));
  }
  SignalScope signals(wake[1]);

  std::vector<std::string> argv = o.argv;
  std::vector<char*> argv_c = CStrings(argv);
  std::vector<Child> children;
  std::vector<Stream> streams;
  Status start_error;
  const pid_t launcher = getpid();
  for (int rank = 0; rank < o.nproc; ++rank) {
    auto vars = o.env;
    vars.insert(vars.end(), {{"RANK", std::to_string(rank)},
                             {"WORLD_SIZE", std::to_string(o.nproc)},
                             {"LOCAL_RANK", std::to_string(rank)},
                             {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
                             {"MASTER_ADDR", "127.0.0.1"},
                             {"MASTER_PORT", std::to_string(o.master_port)},
                             {"OMP_NUM_THREADS", "1"}});
    if (static_cast<size_t>(rank) < o.node_ids.size()) {
      vars.push_back({"HY_NODE_ID", std::to_string(o.node_ids[rank])});
    }
    std::vector<std::string> env = Environment(vars);
    std::vector<char*> env_c = CStrings(env);
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
      start_error = Status::IOError(std::string("pipe: ") + strerror(errno));
      break;
    }
    if (pipe2(err, O_CLOEXEC) != 0) {
      start_error = Status::IOError(std::string("pipe: ") + strerror(errno));
      close(out[0]);
      close(out[1]);
      break;
    }
    const pid_t pid = fork();
    if (pid == 0) {  // The worker: async-signal-safe calls only.
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != launcher) _exit(1);
      // A stop that arrives while the worker starts up waits for it: the
      // worker unblocks these once it catches them (train_command.cc), so
      // a Ctrl-C during start-up is a stop, not a worker killed.
      HoldStopSignals();
      execve(o.executable.c_str(), argv_c.data(), env_c.data());
      const char msg[] = "hyctl train: cannot exec the worker\n";
      (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
      start_error = Status::IOError(std::string("fork: ") + strerror(errno));
      close(out[0]);
      close(err[0]);
      break;
    }
    children.push_back({pid, rank, true});
    streams.push_back({out[0], rank, rank == 0, ""});
    streams.push_back({err[0], rank, false, ""});
  }

  std::optional<std::string> failure;  // The first failure, described.
  int failure_code = 0;
  int stopped_by = 0;  // The signal the launcher was stopped by.
  int signals_seen = 0;
  std::optional<Clock::time_point> first_signal_at;
  std::optional<Clock::time_point> kill_at;  // SIGKILL the rest then.
  std::optional<Clock::time_point> all_exited;
  auto signal_all = [&children](int sig) {
    for (const Child& c : children) {
      if (c.running) kill(c.pid, sig);
    }
  };
  auto stop_all = [&](Clock::time_point now) {
    if (kill_at) return;
    signal_all(SIGKILL);
    kill_at = now;
  };
  if (!start_error.ok()) stop_all(Clock::now());

  for (;;) {
    std::vector<pollfd> fds = {{wake[0], POLLIN, 0}};
    for (const Stream& s : streams) fds.push_back({s.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 200);
    char drain[64];
    while (read(wake[0], drain, sizeof(drain)) > 0) {
    }
    const Clock::time_point now = Clock::now();

    // Output.
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Stream& s = streams[i - 1];
      char buf[65536];
      const ssize_t n = read(s.fd, buf, sizeof(buf));
      if (n > 0) {
        s.partial.append(buf, static_cast<size_t>(n));
        s.Emit(false);
      } else if (n == 0 || errno != EINTR) {
        s.Emit(true);
        close(s.fd);
        s.fd = -1;
      }
    }
    streams.erase(std::remove_if(streams.begin(), streams.end(),
                                 [](const Stream& s) { return s.fd < 0; }),
                  streams.end());

    // Exits.
    int status = 0;
    for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
      if (pid == o.watch_pid) {
        res.watch_status = status;
        if (!failure && stopped_by == 0 && !kill_at) {
          failure = o.watch_name + (WIFEXITED(status)
                                        ? " exited with status " +
                                              std::to_string(WEXITSTATUS(status))
                                        : " was killed");
          failure_code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
          res.first_failed = kWatchedFailed;
          failed_at = now;
          stop_all(now);
        }
        continue;
      }
      for (Child& c : children) {
        if (c.pid != pid) continue;
        c.running = false;
        res.wait_status[c.rank] = status;
        if (Failed(status) && !failure && stopped_by == 0 && !kill_at) {
          failure = DescribeExit(c.rank, status);
          failure_code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
          res.first_failed = c.rank;
          failed_at = now;
          if (o.peer_exit_seconds <= 0) stop_all(now);
        }
      }
    }

    // Signals to the launcher: forward (the workers save and stop); repeats
    // within kStopRepeatSeconds are the same stop (a terminal signals the
    // whole process group, the workers got it too); a later one, or the
    // grace running out, kills.
    if (g_signal_count != signals_seen) {
      signals_seen = g_signal_count;
      if (stopped_by == 0) stopped_by = g_signal;
      if (first_signal_at &&
          now - *first_signal_at > std::chrono::seconds(kStopRepeatSeconds)) {
        signal_all(SIGKILL);
      } else if (!first_signal_at && !kill_at) {
        first_signal_at = now;
        signal_all(g_signal);
        kill_at = now + std::chrono::milliseconds(
                            static_cast<int64_t>(o.stop_grace_seconds * 1000));
      }
    }
    if (failed_at && !kill_at &&
        now - *failed_at > std::chrono::milliseconds(static_cast<int64_t>(
                               o.peer_exit_seconds * 1000))) {
      stop_all(now);
    }
    // Waiting for workers that are all stopped (a hung rank SIGSTOPped)
    // is waiting for nothing: they cannot exit by themselves.
    if (failed_at && !kill_at &&
        std::any_of(children.begin(), children.end(),
                    [](const Child& c) { return c.running; }) &&
        std::all_of(children.begin(), children.end(), [](const Child& c) {
          return !c.running || IsStopped(c.pid);
        })) {
      stop_all(now);
    }
    if (kill_at && now >= *kill_at) {
      signal_all(SIGKILL);
      kill_at = Clock::time_point::max();
    }

    const bool running = std::any_of(children.begin(), children.end(),
                                     [](const Child& c) { return c.running; });
    if (!running && !all_exited) {
      all_exited = now;
      if (failed_at) {
        res.stop_seconds =
            std::chrono::duration<double>(now - *failed_at).count();
      }
    }
    // Done once every worker has exited and its pipes are drained (or, if
    // something it started holds them open, a moment later).
    if (!running &&
        (streams.empty() || now - *all_exited > std::chrono::seconds(2))) {
      break;
    }
  }
  for (const Stream& s : streams) close(s.fd);
  close(wake[0]);
  close(wake[1]);

  HY_RETURN_IF_ERROR(start_error);
  if (failure) {
    *exit_code = failure_code == 0 ? 1 : failure_code;
    return Status::Aborted(*failure + "; stopped the other workers");
  }
  if (stopped_by != 0 &&
      std::all_of(res.wait_status.begin(), res.wait_status.end(),
                  [](int st) { return WIFEXITED(st) && WEXITSTATUS(st) == 0; })) {
    res.stopped_by = stopped_by;  // Every worker saved and stopped.
    return Status::OK();
  }
  if (stopped_by != 0) {
    *exit_code = 1;
    return Status::Aborted(std::string("stopped by ") + strsignal(stopped_by) +
                           "; forwarded it to the workers");
  }
  return Status::OK();
}

}  // namespace hy::launcher
