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

namespace {

// Forks worker `rank` running `o.executable` with `argv`, its stdout and
// stderr into pipes; the child, and the read ends as `streams`.
Status SpawnWorker(const LaunchOptions& o, int rank,
                   std::vector<char*>& argv_c, pid_t launcher,
                   std::vector<Child>* children,
                   std::vector<Stream>* streams) {
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
    return Status::IOError(std::string("pipe: ") + strerror(errno));
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    const Status s = Status::IOError(std::string("pipe: ") + strerror(errno));
    close(out[0]);
    close(out[1]);
    return s;
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
    const Status s = Status::IOError(std::string("fork: ") + strerror(errno));
    close(out[0]);
    close(err[0]);
    return s;
  }
  children->push_back({pid, rank, true});
  streams->push_back({out[0], rank, rank == 0, ""});
  streams->push_back({err[0], rank, false, ""});
  return Status::OK();
}

// The running workers of one RunLauncher call: their output copied out,
// their exits, the launcher's signals forwarded, the deadlines that end in
// SIGKILL. One thread; the signal handler only sets g_signal* and wakes
// the poll.
class WorkerGroup {
 public:
  WorkerGroup(const LaunchOptions& o, LaunchResult* res) : o_(o), res_(*res) {}

  // Starts every worker; the first error stops those started.
  Status Start(pid_t launcher) {
    std::vector<std::string> argv = o_.argv;
    std::vector<char*> argv_c = CStrings(argv);
    Status st;
    for (int rank = 0; rank < o_.nproc && st.ok(); ++rank) {
      st = SpawnWorker(o_, rank, argv_c, launcher, &children_, &streams_);
    }
    if (!st.ok()) StopAll(Clock::now());
    return st;
  }

  // Waits (at most 200 ms) for output, exits or a signal, and handles
  // them. Returns false once every worker has exited and its pipes are
  // drained (or, if something it started holds them open, a moment later).
  bool Step(int wake_fd) {
    std::vector<pollfd> fds = {{wake_fd, POLLIN, 0}};
    for (const Stream& s : streams_) fds.push_back({s.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 200);
    char drain[64];
    while (read(wake_fd, drain, sizeof(drain)) > 0) {
    }
    const Clock::time_point now = Clock::now();
    CopyOutput(fds);
    ReapExits(now);
    ForwardSignals(now);
    EnforceDeadlines(now);
    const bool running = AnyRunning();
    if (!running && !all_exited_) {
      all_exited_ = now;
      if (failed_at_) {
        res_.stop_seconds =
            std::chrono::duration<double>(now - *failed_at_).count();
      }
    }
    return running ||
           (!streams_.empty() && now - *all_exited_ <= std::chrono::seconds(2));
  }

  // Closes what is left of the workers' pipes.
  ~WorkerGroup() {
    for (const Stream& s : streams_) close(s.fd);
  }

  // How the workers ended, as RunLauncher reports it.
  Status Outcome(int* exit_code) const {
    if (failure_) {
      *exit_code = failure_code_ == 0 ? 1 : failure_code_;
      return Status::Aborted(*failure_ + "; stopped the other workers");
    }
    if (stopped_by_ != 0 &&
        std::all_of(res_.wait_status.begin(), res_.wait_status.end(),
                    [](int st) {
                      return WIFEXITED(st) && WEXITSTATUS(st) == 0;
                    })) {
      res_.stopped_by = stopped_by_;  // Every worker saved and stopped.
      return Status::OK();
    }
    if (stopped_by_ != 0) {
      *exit_code = 1;
      return Status::Aborted(std::string("stopped by ") +
                             strsignal(stopped_by_) +
                             "; forwarded it to the workers");
    }
    return Status::OK();
  }

 private:
  bool AnyRunning() const {
    return std::any_of(children_.begin(), children_.end(),
                       [](const Child& c) { return c.running; });
  }

  void SignalAll(int sig) {
    for (const Child& c : children_) {
      if (c.running) kill(c.pid, sig);
    }
  }

  void StopAll(Clock::time_point now) {
    if (kill_at_) return;
    SignalAll(SIGKILL);
    kill_at_ = now;
  }

  // The first failure (a worker, or the watched process), unless the
  // launcher is stopping them already.
  void NoteFailure(std::string what, int status, int who,
                   Clock::time_point now) {
    failure_ = std::move(what);
    failure_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    res_.first_failed = who;
    failed_at_ = now;
  }
  bool Failing() const { return failure_ || stopped_by_ != 0 || kill_at_; }

  // The workers' output, line by line (fds[i + 1] is streams_[i]).
  void CopyOutput(const std::vector<pollfd>& fds) {
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Stream& s = streams_[i - 1];
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
    streams_.erase(std::remove_if(streams_.begin(), streams_.end(),
                                  [](const Stream& s) { return s.fd < 0; }),
                   streams_.end());
  }

  void ReapExits(Clock::time_point now) {
    int status = 0;
    for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
      if (pid == o_.watch_pid) {
        res_.watch_status = status;
        if (!Failing()) {
          NoteFailure(o_.watch_name +
                          (WIFEXITED(status)
                               ? " exited with status " +
                                     std::to_string(WEXITSTATUS(status))
                               : " was killed"),
                      status, kWatchedFailed, now);
          StopAll(now);
        }
        continue;
      }
      for (Child& c : children_) {
        if (c.pid != pid) continue;
        c.running = false;
        res_.wait_status[c.rank] = status;
        if (Failed(status) && !Failing()) {
          NoteFailure(DescribeExit(c.rank, status), status, c.rank, now);
          if (o_.peer_exit_seconds <= 0) StopAll(now);
        }
      }
    }
  }

  // Signals to the launcher: forward (the workers save and stop); repeats
  // within kStopRepeatSeconds are the same stop (a terminal signals the
  // whole process group, the workers got it too); a later one, or the
  // grace running out, kills.
  void ForwardSignals(Clock::time_point now) {
    if (g_signal_count == signals_seen_) return;
    signals_seen_ = g_signal_count;
    if (stopped_by_ == 0) stopped_by_ = g_signal;
    if (first_signal_at_ &&
        now - *first_signal_at_ > std::chrono::seconds(kStopRepeatSeconds)) {
      SignalAll(SIGKILL);
    } else if (!first_signal_at_ && !kill_at_) {
      first_signal_at_ = now;
      SignalAll(g_signal);
      kill_at_ = now + std::chrono::milliseconds(static_cast<int64_t>(
                           o_.stop_grace_seconds * 1000));
    }
  }

  // After a failure, the others get peer_exit_seconds to exit by
  // themselves; workers that are all stopped (a hung rank SIGSTOPped)
  // cannot, so they are not waited for. A kill deadline passed kills.
  void EnforceDeadlines(Clock::time_point now) {
    if (failed_at_ && !kill_at_ &&
        now - *failed_at_ > std::chrono::milliseconds(static_cast<int64_t>(
                                o_.peer_exit_seconds * 1000))) {
      StopAll(now);
    }
    if (failed_at_ && !kill_at_ && AnyRunning() &&
        std::all_of(children_.begin(), children_.end(), [](const Child& c) {
          return !c.running || IsStopped(c.pid);
        })) {
      StopAll(now);
    }
    if (kill_at_ && now >= *kill_at_) {
      SignalAll(SIGKILL);
      kill_at_ = Clock::time_point::max();
    }
  }

  const LaunchOptions& o_;
  LaunchResult& res_;
  std::vector<Child> children_;
  std::vector<Stream> streams_;
  std::optional<std::string> failure_;  // The first failure, described.
  int failure_code_ = 0;
  std::optional<Clock::time_point> failed_at_;
  int stopped_by_ = 0;  // The signal the launcher was stopped by.
  int signals_seen_ = 0;
  std::optional<Clock::time_point> first_signal_at_;
  std::optional<Clock::time_point> kill_at_;  // SIGKILL the rest then.
  std::optional<Clock::time_point> all_exited_;
};

}  // namespace

Status RunLauncher(const LaunchOptions& o, int* exit_code,
                   LaunchResult* result) {
  *exit_code = 0;
  LaunchResult local_result;
  LaunchResult& res = result != nullptr ? *result : local_result;
  res = LaunchResult();
  res.wait_status.assign(o.nproc, -1);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::IOError(std::string("pipe: ") + strerror(errno));
  }
  Status start_error;
  Status outcome;
  {
    SignalScope signals(wake[1]);
    WorkerGroup group(o, &res);
    start_error = group.Start(getpid());
    while (group.Step(wake[0])) {
    }
    if (start_error.ok()) outcome = group.Outcome(exit_code);
  }
  close(wake[0]);
  close(wake[1]);
  HY_RETURN_IF_ERROR(start_error);
  return outcome;
}

}  // namespace hy::launcher
