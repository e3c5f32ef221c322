// The vLLM engines of a `hyctl train` run with rollout.engine vllm (and no
// rollout.vllm.urls): checked, started and kept alive on this machine.
//
// PrepareEngines, before any worker starts: finds vLLM's interpreter
// (rollout.vllm.python, HY_VLLM_PYTHON, else the .venv-vllm/ beside the
// sources), checks that it imports vllm and hy_vllm (python/), writes the
// engines' model directory (config.json and the run's tokenizer files; the
// weights come from the trainer before the first rollout, the engines
// start with dummy ones), picks a loopback port per engine and a fresh
// per-run key. Its errors are configuration errors (exit 78).
//
// EngineKeeper::Start forks a keeper process that starts each engine
// (`python -m hy_vllm.serve`, which execs vLLM's OpenAI server with the
// development routes on, hy_vllm's worker extension, `hy_shm` backend and
// key middleware: python/hy_vllm/serve.py holds that command line) in its
// own process group with its output in <store>/engines/engine-<i>.log and
// its process group in engine-<i>.pid (rank 0 kills a hung engine by it),
// polls /health, and restarts an engine that exits after it was ready (up
// to rollout.vllm.max_restarts times). It exits 78 when an engine exits or
// does not answer within rollout.vllm.start_timeout_s before it was ever
// ready (vLLM cannot serve this model here: its log's tail says why), 1
// when an engine exhausted its restarts; the supervisor watches it like a
// worker (LaunchOptions::watch_pid). The keeper stops its engines when it
// gets SIGTERM or its parent dies.
//
// Thread-safety: call from hyctl's main thread, single-threaded (it forks).

#ifndef HY_LAUNCHER_ENGINE_KEEPER_H_
#define HY_LAUNCHER_ENGINE_KEEPER_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "hy/common/result.h"
#include "hy/trainer/config/config.h"

namespace hy::launcher {

struct EnginePlan {
  std::string python;     // vLLM's interpreter.
  std::string dir;        // <store>/engines: logs, pid files, model/.
  std::string model_dir;  // dir/model.
  std::string api_key;
  std::vector<std::string> urls;  // http://127.0.0.1:<port>, one per engine.
  std::string weight_file;        // /dev/shm/hy-weights-<run id>.
  // The workers' environment: HY_VLLM_URLS, HY_VLLM_API_KEY,
  // HY_VLLM_ENGINE_DIR, HY_VLLM_WEIGHT_FILE.
  std::vector<std::pair<std::string, std::string>> WorkerEnv() const;
};

// See above. InvalidArgument / FailedPrecondition name what is missing.
Result<EnginePlan> PrepareEngines(const trainer::TrainConfig& c,
                                  const std::string& run_id);

class EngineKeeper {
 public:
  // Forks the keeper; IOError if it cannot.
  static Result<EngineKeeper> Start(const trainer::TrainConfig& c,
                                    const EnginePlan& plan);
  EngineKeeper(EngineKeeper&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)),
        weight_file_(std::move(other.weight_file_)) {}
  EngineKeeper& operator=(EngineKeeper&&) = delete;
  // Stops the keeper (and its engines) if it still runs; removes the
  // weight file a killed rank 0 may have left.
  ~EngineKeeper();

  pid_t pid() const { return pid_; }
  // The keeper exited (the supervisor reaped it): nothing to stop.
  void Reaped() { pid_ = -1; }

 private:
  EngineKeeper(pid_t pid, std::string weight_file)
      : pid_(pid), weight_file_(std::move(weight_file)) {}
  pid_t pid_;
  std::string weight_file_;
};

}  // namespace hy::launcher

#endif  // HY_LAUNCHER_ENGINE_KEEPER_H_
