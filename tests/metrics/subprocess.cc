#include "subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace hy::metrics::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Forks and execs argv with stdin/stdout/stderr redirected to the given
// paths, and returns once the child runs argv[0]. The child gets SIGKILL if
// the parent dies.
//
// Returning only after the exec matters: until then the child holds copies
// of all the parent's descriptors (e.g. an Exposer's listening socket), so
// its /proc view would show the parent's sockets as its own. A close-on-exec
// pipe tells the parent: EOF once the exec succeeded, or the errno of what
// failed.
Result<pid_t> ForkExec(const std::vector<std::string>& argv,
                       const std::string& in_path, const std::string& out_path,
                       const std::string& err_path) {
  if (argv.empty()) return Status::InvalidArgument("empty argv");
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const bool err_to_out = err_path == out_path;
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) return Status::Internal("pipe failed");
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(exec_pipe[0]);
    close(exec_pipe[1]);
    return Status::Internal("fork failed");
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    const int report = exec_pipe[1];
    auto fail = [report](int error, int code) {
      ssize_t ignored = write(report, &error, sizeof(error));
      (void)ignored;
      _exit(code);
    };
    close(exec_pipe[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) fail(ESRCH, 127);
    int in = open(in_path.c_str(), O_RDONLY);
    if (in < 0) fail(errno, 126);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) fail(errno, 126);
    int err = err_to_out
                  ? out
                  : open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err < 0) fail(errno, 126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    // No inherited descriptors (e.g. an Exposer's socket) but the report
    // pipe, which the exec closes.
    if (report > 3) close_range(3, report - 1, 0);
    close_range(report + 1, ~0U, 0);
    execv(args[0], args.data());
    fail(errno, 127);
  }
  close(exec_pipe[1]);
  int child_error = 0;
  ssize_t n;
  do {
    n = read(exec_pipe[0], &child_error, sizeof(child_error));
  } while (n < 0 && errno == EINTR);
  close(exec_pipe[0]);
  if (n != 0) {  // The child reported a failure (or the pipe broke).
    int status = 0;
    waitpid(pid, &status, 0);
    return Status::Internal("cannot run " + argv[0] + ": " +
                            std::strerror(n > 0 ? child_error : errno));
  }
  return pid;
}

bool WaitFor(pid_t pid, int timeout_ms, int* status) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid || r < 0) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
      "/hy_metrics_test.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) != nullptr) path_ = buf.data();
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string FindExecutable(const std::string& name) {
  std::string dirs = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  dirs += ":/usr/bin:/usr/sbin:/usr/local/bin";
  std::stringstream ss(dirs);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string MissingBinaryMessage(const std::string& binary,
                                 const std::string& package) {
  return "required binary '" + binary +
         "' is not installed (not in PATH): " + "install the Debian package '" +
         package +
         "' (scripts/install-deps.sh does). This test needs the real one and "
         "does not skip.";
}

Result<std::unique_ptr<ReservedPort>> ReservedPort::Create() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  // No SO_REUSEADDR and no listen(): the kernel refuses connections to the
  // port and lets no other socket bind it while fd is open.
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return Status::IOError("cannot bind an ephemeral loopback port");
  }
  return std::unique_ptr<ReservedPort>(
      new ReservedPort(fd, ntohs(addr.sin_port)));
}

ReservedPort::~ReservedPort() { close(fd_); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  out.close();
  if (!out) return Status::IOError("cannot write " + path);
  return Status::OK();
}

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const std::string& input, int timeout_ms) {
  TempDir dir;
  if (dir.path().empty()) return Status::Internal("mkdtemp failed");
  std::string in = dir.path() + "/stdin";
  std::string out = dir.path() + "/stdout";
  std::string err = dir.path() + "/stderr";
  HY_RETURN_IF_ERROR(WriteFile(in, input));
  HY_ASSIGN_OR_RETURN(pid_t pid, ForkExec(argv, in, out, err));
  ProcessResult result;
  int status = 0;
  if (!WaitFor(pid, timeout_ms, &status)) {
    result.timed_out = true;
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(out);
  result.err = ReadFile(err);
  return result;
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::string& log_path) {
  HY_ASSIGN_OR_RETURN(pid_t pid,
                      ForkExec(argv, "/dev/null", log_path, log_path));
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, log_path));
}

ChildProcess::~ChildProcess() {
  if (reaped_) return;
  int status = 0;
  kill(pid_, SIGTERM);
  if (!WaitFor(pid_, 5000, &status)) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
}

bool ChildProcess::Running() {
  if (reaped_) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_ || r < 0) reaped_ = true;
  return !reaped_;
}

int ChildProcess::ListeningPort() const {
  if (reaped_) return 0;  // The pid may belong to another process by now.
  const std::string proc = "/proc/" + std::to_string(pid_);
  // The inodes of the child's sockets ("socket:[<inode>]" links in fd/).
  std::set<std::string> inodes;
  std::error_code ec;
  std::filesystem::directory_iterator it(proc + "/fd", ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code link_ec;
    std::string target =
        std::filesystem::read_symlink(it->path(), link_ec).string();
    if (!link_ec && target.rfind("socket:[", 0) == 0 && target.back() == ']') {
      inodes.insert(target.substr(8, target.size() - 9));
    }
  }
  if (inodes.empty()) return 0;
  // Lines of /proc/<pid>/net/tcp{,6}: sl local_address rem_address st
  // tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...; addresses
  // are <hex ip>:<hex port>, state 0A is LISTEN.
  for (const char* table : {"/net/tcp", "/net/tcp6"}) {
    std::ifstream in(proc + table);
    std::string line;
    std::getline(in, line);  // Header.
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string sl, local, remote, state, queues, timer, retransmits, uid,
          timeout, inode;
      if (!(fields >> sl >> local >> remote >> state >> queues >> timer >>
            retransmits >> uid >> timeout >> inode)) {
        continue;
      }
      size_t colon = local.rfind(':');
      if (state != "0A" || inodes.count(inode) == 0 ||
          colon == std::string::npos) {
        continue;
      }
      return static_cast<int>(
          std::strtoul(local.c_str() + colon + 1, nullptr, 16));
    }
  }
  return 0;
}

std::string ChildProcess::LogTail(size_t max_bytes) const {
  std::string log = ReadFile(log_path_);
  if (log.size() > max_bytes) log = "..." + log.substr(log.size() - max_bytes);
  return log;
}

}  // namespace hy::metrics::testing
