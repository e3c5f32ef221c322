// The vLLM engines' preparation and keeper (see engine_keeper.h).

#include "hy/launcher/engine_keeper.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "hy/launcher/exit_codes.h"
#include "hy/launcher/shm_segments.h"
#include "hy/launcher/stop_signals.h"
#include "hy/launcher/worker_launcher.h"
#include "hy/trainer/data/special_tokens.h"
#include "hy/trainer/hf/hf_export.h"
#include "hy/trainer/vllm/engine_client.h"

#ifndef HY_SOURCE_PYTHON_DIR
#define HY_SOURCE_PYTHON_DIR ""
#endif
#ifndef HY_DEFAULT_VLLM_PYTHON
#define HY_DEFAULT_VLLM_PYTHON ""
#endif

namespace hy::launcher {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string RandomKey() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char b[24] = {};
  in.read(reinterpret_cast<char*>(b), sizeof(b));
  std::string out;
  char hex[3];
  for (unsigned char c : b) {
    std::snprintf(hex, sizeof(hex), "%02x", c);
    out += hex;
  }
  return out;
}

using Env = std::vector<std::pair<std::string, std::string>>;

// In a forked child: `argv` with `env` added to the environment; exits 127
// (saying why on stderr) when it cannot be run.
[[noreturn]] void ExecWith(const std::vector<std::string>& argv,
                           const Env& env) {
  // hyctl train holds the stop signals until its launcher catches them
  // (stop_signals.h); a program that inherited them held would never see
  // the SIGTERM that stops it.
  ReleaseStopSignals();
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  std::vector<char*> args;
  for (const std::string& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  execv(args[0], args.data());
  std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

// Runs `argv` with `env` added, its output captured; returns the exit
// status and the output's last lines.
int RunCapture(const std::vector<std::string>& argv,
               const std::vector<std::pair<std::string, std::string>>& env,
               std::string* tail) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    ExecWith(argv, env);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (out.size() > 600) out = "..." + out.substr(out.size() - 600);
  *tail = out;
  return status;
}

std::string LogTail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size();
       ++i) {
    out += "  " + all[i] + "\n";
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> EngineEnv(
    const trainer::TrainConfig& c, const EnginePlan& plan) {
  std::string pythonpath = HY_SOURCE_PYTHON_DIR;
  if (const char* p = std::getenv("PYTHONPATH"); p != nullptr && *p != 0) {
    pythonpath += std::string(":") + p;
  }
  return {{"PYTHONPATH", pythonpath},
          {"VLLM_SERVER_DEV_MODE", "1"},
          {"HY_VLLM_API_KEY", plan.api_key},
          {"VLLM_CPU_KVCACHE_SPACE", std::to_string(c.rollout.vllm.kv_cache_gib)},
          // The trainer's ranks have the cores: no pinning.
          {"VLLM_CPU_OMP_THREADS_BIND", "nobind"},
          {"VLLM_NO_USAGE_STATS", "1"},
          {"VLLM_LOGGING_LEVEL", "WARNING"},
          {"TOKENIZERS_PARALLELISM", "false"}};
}

int PortOf(const std::string& url) {
  return std::atoi(url.substr(url.rfind(':') + 1).c_str());
}

// The keeper process.
volatile sig_atomic_t g_stop = 0;
void OnStop(int) { g_stop = 1; }

// vLLM's token budget per step: every prompt of one rollout prefilled in
// one step, at least vLLM's CPU default (2048). vLLM's CPU backend fails a
// seeded request (hy seeds each) whose prefill it splits over steps
// (vLLM 0.32: "CPU Generator does not use offset").
int64_t StepTokenBudget(const trainer::TrainConfig& c) {
  const int64_t prompt = std::min<int64_t>(c.data.max_prompt_length,
                                           c.model.max_position_embeddings);
  return std::max<int64_t>(
      2048, static_cast<int64_t>(c.rollout.batch_size) * c.rollout.n * prompt);
}

pid_t SpawnEngine(const trainer::TrainConfig& c, const EnginePlan& plan,
                  size_t e) {
  const std::string log = plan.dir + "/engine-" + std::to_string(e) + ".log";
  const auto env = EngineEnv(c, plan);
  const trainer::VllmConfig& vc = c.rollout.vllm;
  // python/hy_vllm/serve.py knows vLLM's command line (hy's extension,
  // backend, key middleware, sampling and log-prob modes) and execs it.
  std::vector<std::string> argv = {
      plan.python, "-m", "hy_vllm.serve",
      "--model", plan.model_dir,
      "--port", std::to_string(PortOf(plan.urls[e])),
      "--dtype", vc.dtype,
      "--max-model-len", std::to_string(c.model.max_position_embeddings),
      "--tensor-parallel-size", std::to_string(vc.tensor_parallel_size),
      "--seed", std::to_string(c.trainer.seed),
      "--max-num-batched-tokens", std::to_string(StepTokenBudget(c))};
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    ExecWith(argv, env);
  }
  std::ofstream(plan.dir + "/engine-" + std::to_string(e) + ".pid")
      << pid << "\n";
  return pid;
}

// Unlinks what engine group `pgid` left in /dev/shm (see shm_segments.h)
// once no process of it is left; `known` holds what it was seen to map.
void ReclaimEngineShm(size_t e, pid_t pgid, std::set<std::string> known) {
  if (!WaitGroupGone(pgid, std::chrono::seconds(5))) {
    std::cerr << "hyctl train: vLLM engine " << e << "'s processes outlived "
              << "SIGKILL by 5 s; its shared memory stays" << std::endl;
    return;
  }
  const auto gone = ReclaimShmSegments(known);
  if (!gone.empty()) {
    std::cerr << "hyctl train: removed " << gone.size()
              << " shared-memory segment(s) vLLM engine " << e
              << " left in /dev/shm" << std::endl;
  }
}

// Stops the engines: SIGTERM to each group, SIGKILL what is left after
// 10 s, then their leftover shared memory. `shm` holds what each mapped.
void StopEngines(const std::vector<pid_t>& pids,
                 std::vector<std::set<std::string>> shm) {
  for (size_t e = 0; e < pids.size(); ++e) {
    if (pids[e] <= 0) continue;
    shm[e].merge(GroupShmSegments(pids[e]));
    kill(-pids[e], SIGTERM);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (pid_t p : pids) {
    if (p <= 0) continue;
    while (Clock::now() < deadline && waitpid(p, nullptr, WNOHANG) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(-p, SIGKILL);  // The group: vLLM's engine core and workers too.
    waitpid(p, nullptr, WNOHANG);
  }
  for (size_t e = 0; e < pids.size(); ++e) {
    if (pids[e] > 0) ReclaimEngineShm(e, pids[e], std::move(shm[e]));
  }
}

[[noreturn]] void RunKeeper(const trainer::TrainConfig& c,
                            const EnginePlan& plan) {
  signal(SIGTERM, OnStop);
  signal(SIGINT, SIG_IGN);  // The supervisor decides when engines stop.
  ReleaseStopSignals();  // Forked while hyctl train held them.
  const trainer::VllmConfig& vc = c.rollout.vllm;
  const size_t n = plan.urls.size();
  std::vector<pid_t> pids(n, -1);
  std::vector<bool> ready(n, false);
  std::vector<int> restarts(n, 0);
  std::vector<Clock::time_point> started(n);
  // The shared-memory segments each engine's group was seen to map: read
  // when it is ready, every ~10 s after, and as it dies.
  std::vector<std::set<std::string>> shm(n);
  int round = 0;
  std::vector<trainer::EngineClient> clients;
  for (size_t e = 0; e < n; ++e) {
    clients.emplace_back(plan.urls[e], plan.api_key, 2);
    pids[e] = SpawnEngine(c, plan, e);
    started[e] = Clock::now();
  }
  auto fail = [&](int code, const std::string& why) {
    std::cerr << "hyctl train: " << why << std::endl;
    StopEngines(pids, shm);
    _exit(code);
  };
  while (g_stop == 0) {
    if (getppid() == 1) break;  // The supervisor is gone.
    int status = 0;
    for (pid_t p; (p = waitpid(-1, &status, WNOHANG)) > 0;) {
      for (size_t e = 0; e < n; ++e) {
        if (pids[e] != p) continue;
        pids[e] = -1;
        // What its processes still alive map, then what is left of its
        // group killed and its shared memory reclaimed.
        shm[e].merge(GroupShmSegments(p));
        kill(-p, SIGKILL);
        ReclaimEngineShm(e, p, std::exchange(shm[e], {}));
        const std::string log =
            plan.dir + "/engine-" + std::to_string(e) + ".log";
        const std::string how =
            WIFEXITED(status) ? "exited with status " +
                                    std::to_string(WEXITSTATUS(status))
                              : std::string("was killed by signal ") +
                                    std::to_string(WTERMSIG(status));
        if (!ready[e]) {
          fail(kExitConfig, "configuration error: vLLM engine " +
                                std::to_string(e) + " " + how +
                                " before it was ready; the end of " + log +
                                ":\n" + LogTail(log, 12));
        }
        if (restarts[e] >= vc.max_restarts) {
          fail(1, "vLLM engine " + std::to_string(e) + " " + how +
                      " after " + std::to_string(restarts[e]) +
                      " restart(s) (rollout.vllm.max_restarts); giving up");
        }
        ++restarts[e];
        std::cerr << "hyctl train: vLLM engine " << e << " " << how
                  << "; restarting it (restart " << restarts[e] << ")"
                  << std::endl;
        ready[e] = false;
        pids[e] = SpawnEngine(c, plan, e);
        started[e] = Clock::now();
      }
    }
    for (size_t e = 0; e < n; ++e) {
      if (ready[e] || pids[e] < 0) continue;
      const double waited =
          std::chrono::duration<double>(Clock::now() - started[e]).count();
      if (clients[e].Health(1).ok()) {
        ready[e] = true;
        shm[e].merge(GroupShmSegments(pids[e]));
        std::cerr << "hyctl train: vLLM engine " << e << " ready at "
                  << plan.urls[e] << " after " << static_cast<int>(waited)
                  << " s" << std::endl;
      } else if (waited > vc.start_timeout_s) {
        const std::string log =
            plan.dir + "/engine-" + std::to_string(e) + ".log";
        fail(restarts[e] == 0 ? kExitConfig : 1,
             std::string(restarts[e] == 0 ? "configuration error: " : "") +
                 "vLLM engine " + std::to_string(e) +
                 " did not answer within rollout.vllm.start_timeout_s (" +
                 std::to_string(static_cast<int>(vc.start_timeout_s)) +
                 " s); the end of " + log + ":\n" + LogTail(log, 12));
      }
    }
    if (++round % 20 == 0) {
      for (size_t e = 0; e < n; ++e) {
        if (ready[e] && pids[e] > 0) shm[e].merge(GroupShmSegments(pids[e]));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  StopEngines(pids, shm);
  _exit(0);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> EnginePlan::WorkerEnv()
    const {
  std::string list;
  for (const std::string& u : urls) list += (list.empty() ? "" : ",") + u;
  return {{"HY_VLLM_URLS", list},
          {"HY_VLLM_API_KEY", api_key},
          {"HY_VLLM_ENGINE_DIR", dir},
          {"HY_VLLM_WEIGHT_FILE", weight_file}};
}

Result<EnginePlan> PrepareEngines(const trainer::TrainConfig& c,
                                  const std::string& run_id) {
  const trainer::VllmConfig& vc = c.rollout.vllm;
  EnginePlan plan;
  plan.python = vc.python;
  if (plan.python.empty() && std::getenv("HY_VLLM_PYTHON") != nullptr) {
    plan.python = std::getenv("HY_VLLM_PYTHON");
  }
  if (plan.python.empty()) plan.python = HY_DEFAULT_VLLM_PYTHON;
  std::error_code ec;
  if (plan.python.empty() || !fs::exists(plan.python, ec)) {
    return Status::FailedPrecondition(
        "rollout.engine vllm: no vLLM interpreter at '" + plan.python +
        "' (rollout.vllm.python, HY_VLLM_PYTHON; scripts/install-deps.sh "
        "installs vLLM into .venv-vllm/)");
  }
  const std::string tokenizer =
      c.data.tokenizer.empty() ? c.model.path : c.data.tokenizer;
  if (tokenizer.empty()) {
    return Status::InvalidArgument(
        "rollout.engine vllm needs the run's tokenizer for the engine: set "
        "data.tokenizer or model.path");
  }
  plan.dir = fs::absolute(c.checkpoint.store_root).string() + "/engines";
  plan.model_dir = plan.dir + "/model";
  fs::create_directories(plan.model_dir, ec);
  if (ec) {
    return Status::IOError("cannot create " + plan.model_dir + ": " +
                           ec.message());
  }
  // vLLM imports, with hy_vllm, in the interpreter given.
  std::string tail;
  const int st = RunCapture(
      {plan.python, "-c",
       "import vllm, hy_vllm.worker, hy_vllm.auth; print(vllm.__version__)"},
      {{"PYTHONPATH", HY_SOURCE_PYTHON_DIR}}, &tail);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    return Status::FailedPrecondition("rollout.engine vllm: " + plan.python +
                                      " cannot import vllm and hy_vllm: " +
                                      tail);
  }
  // The model directory: config.json and the tokenizer; no weights.
  trainer::HfExportOptions ho;
  ho.model = c.model;
  std::string config_json;
  if (!c.model.path.empty()) {
    std::ifstream in(c.model.path + "/config.json");
    std::stringstream ss;
    ss << in.rdbuf();
    config_json = ss.str();
  } else {
    config_json = trainer::HfConfigJson(ho);
  }
  std::ofstream(plan.model_dir + "/config.json") << config_json;
  const std::string tok_dir = trainer::TokenizerDir(tokenizer);
  for (const std::string& f : trainer::TokenizerFileNames()) {
    if (fs::exists(tok_dir + "/" + f, ec)) {
      fs::copy_file(tok_dir + "/" + f, plan.model_dir + "/" + f,
                    fs::copy_options::overwrite_existing, ec);
      if (ec) {
        return Status::IOError("cannot copy " + tok_dir + "/" + f + ": " +
                               ec.message());
      }
    }
  }
  for (int e = 0; e < vc.engines; ++e) {
    HY_ASSIGN_OR_RETURN(const int port, PickFreePort());
    plan.urls.push_back("http://127.0.0.1:" + std::to_string(port));
  }
  plan.api_key = RandomKey();
  plan.weight_file = "/dev/shm/hy-weights-" + run_id;
  return plan;
}

Result<EngineKeeper> EngineKeeper::Start(const trainer::TrainConfig& c,
                                         const EnginePlan& plan) {
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) {
    return Status::IOError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    RunKeeper(c, plan);
  }
  std::cerr << "hyctl train: starting " << plan.urls.size()
            << " vLLM engine(s) (" << plan.python << "), logs in " << plan.dir
            << std::endl;
  return EngineKeeper(pid, plan.weight_file);
}

EngineKeeper::~EngineKeeper() {
  if (!weight_file_.empty()) unlink(weight_file_.c_str());
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace hy::launcher
