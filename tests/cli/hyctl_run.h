// Running a command line from a test: its exit code, stdout and stderr.
// The hyctl subprocess tests share it.

#ifndef HY_TESTS_CLI_HYCTL_RUN_H_
#define HY_TESTS_CLI_HYCTL_RUN_H_

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace hy::testing {

// A prefix for hyctl command lines: no torchrun or launcher variables leak
// in from the test's environment.
inline constexpr const char* kCleanEnv =
    "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT "
    "-u HY_TRAIN_CONFIG_YAML -u HY_RUN_ID -u TORCHELASTIC_RUN_ID ";

struct CmdResult {
  int code = -1;  // The exit code; -1 if it did not exit normally.
  std::string out;
  std::string err;
};

// Runs `command` with /bin/sh; stderr goes through a temporary file.
inline CmdResult RunCommand(const std::string& command) {
  static std::atomic<int> counter{0};
  const std::string err_path = ::testing::TempDir() + "hy-cmd-" +
                               std::to_string(getpid()) + "-" +
                               std::to_string(counter++) + ".stderr";
  CmdResult r;
  FILE* p = popen((command + " 2>'" + err_path + "'").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  std::remove(err_path.c_str());
  return r;
}

// One JSON object per non-empty line (hyctl train -o json).
inline std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

#ifdef HYCTL_PATH
// hyctl (the test target's HYCTL_PATH) outside any torchrun environment,
// killed after 300 s. `env_prefix` ("NAME=value ...") sets variables for it.
inline CmdResult Hyctl(const std::string& args,
                       const std::string& env_prefix = "") {
  return RunCommand(std::string(kCleanEnv) + env_prefix + " timeout 300 " +
                    HYCTL_PATH + " " + args);
}
#endif

}  // namespace hy::testing

#endif  // HY_TESTS_CLI_HYCTL_RUN_H_
