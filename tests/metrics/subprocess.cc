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

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace hy::metrics::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Forks and execs argv with stdin/stdout/stderr redirected to the given
// paths. The child gets SIGKILL if the parent dies.
Result<pid_t> ForkExec(const std::vector<std::string>& argv,
                       const std::string& in_path, const std::string& out_path,
                       const std::string& err_path) {
  if (argv.empty()) return Status::InvalidArgument("empty argv");
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return Status::Internal("fork failed");
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int in = open(in_path.c_str(), O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = err_path == out_path
                  ? out
                  : open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    close_range(3, ~0U, 0);  // No inherited sockets (e.g. an Exposer's).
    execv(args[0], args.data());
    _exit(127);
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

Result<int> FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::IOError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return Status::IOError("cannot bind an ephemeral port");
  }
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

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

std::string ChildProcess::LogTail(size_t max_bytes) const {
  std::string log = ReadFile(log_path_);
  if (log.size() > max_bytes) log = "..." + log.substr(log.size() - max_bytes);
  return log;
}

}  // namespace hy::metrics::testing
