// The supervisor (see supervisor.h).

#include "hy/launcher/supervisor.h"

#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "hy/checkpoint/checkpoint.h"
#include "hy/launcher/engine_keeper.h"
#include "hy/launcher/exit_codes.h"
#include "hy/launcher/worker_launcher.h"
#include "hy/metrics/hy_metrics.h"
#include "hy/recovery/node_layout.h"
#include "hy/recovery/run_identity.h"
#include "hy/trainer/config/config.h"
#include "hy/trainer/config/device.h"
#include "hy/trainer/tokenizer/tokenizer.h"

namespace hy::launcher {
namespace {

namespace fs = std::filesystem;

using trainer::TrainConfig;

// A config that parses but cannot run here: named as such, exit 78, and
// no worker starts (or restarts).
int FailConfig(const Status& s) {
  std::cerr << "hyctl train: configuration error: " << s.ToString() << "\n";
  return kExitConfig;
}

bool Exited(int status, int code) {
  return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == code;
}

std::string NodeList(const std::vector<int>& nodes) {
  std::string out;
  for (int n : nodes) out += (out.empty() ? "" : ",") + std::to_string(n);
  return out;
}

}  // namespace

Status CheckRunnable(const TrainConfig& c) {
  HY_RETURN_IF_ERROR(trainer::ChooseDevice(c.trainer.device).status());
  for (const auto& [key, files] :
       {std::make_pair("data.train_files", &c.data.train_files),
        std::make_pair("data.val_files", &c.data.val_files)}) {
    for (const std::string& file : *files) {
      std::ifstream in(file);
      if (!in) {
        return Status::InvalidArgument(std::string(key) + ": cannot read " +
                                       file + ": " + std::strerror(errno));
      }
    }
  }
  if (!c.data.train_files.empty()) {
    const std::string& path =
        c.data.tokenizer.empty() ? c.model.path : c.data.tokenizer;
    if (path.empty()) {
      return Status::InvalidArgument(
          "data.train_files needs a tokenizer to read the prompts with: set "
          "data.tokenizer or model.path");
    }
    auto tokenizer = trainer::Tokenizer::Load(path);
    if (!tokenizer.ok()) {
      return Status::InvalidArgument((c.data.tokenizer.empty()
                                          ? "model.path (the tokenizer): "
                                          : "data.tokenizer: ") +
                                     std::string(tokenizer.status().message()));
    }
  }
  return Status::OK();
}

int Supervise(const TrainConfig& c, const SuperviseOptions& f) {
  if (f.worker_argv.empty()) {
    return ReportArgs("train",
                      Status::InvalidArgument("no worker command line to run"));
  }
  const int nproc = c.trainer.nproc;
  const int tg = c.rollout.tensor_model_parallel_size;
  // A resumed run on another world size rolls out with the largest TP
  // group that fits (the worker says so); a fresh one must fit.
  if (nproc % tg != 0 && !f.resume) {
    return ReportArgs(
        "train",
        Status::InvalidArgument(
            "rollout.tensor_model_parallel_size " + std::to_string(tg) +
            " must divide the number of workers, trainer.nproc (--nproc) " +
            std::to_string(nproc)));
  }
  if (Status s = CheckRunnable(c); !s.ok()) return FailConfig(s);
  // Nothing is created for a resume that cannot go on.
  if (f.resume) {
    Status s = Status::OK();
    if (f.from_step >= 0) {
      s = RollBackTo(c.checkpoint.store_root,
                     static_cast<uint64_t>(f.from_step), f.drop_newer);
    }
    if (s.ok()) s = CheckResume(c);
    if (!s.ok()) return ReportArgs("train", s);
  }
  const std::string& root = c.checkpoint.store_root;
  // A run continued with more processes than nodes takes fresh nodes.
  Result<std::vector<int>> existing = recovery::ListNodes(root);
  if (!existing.ok()) return ReportArgs("train", existing.status());
  std::vector<int> nodes =
      recovery::AssignNodes(std::vector<int>(nproc, -1), *existing);
  // The run's identity, kept across restarts: the environment's, else the
  // one the stores record when resuming, else a new one.
  std::string run_id = recovery::RunIdFromEnv();
  if (run_id.empty() && f.resume) {
    Result<std::string> recorded = recovery::RecordedRunId(root);
    if (!recorded.ok()) return ReportArgs("train", recorded.status());
    run_id = *recorded;
  }
  if (run_id.empty()) run_id = recovery::NewRunId();
  if (Status v = recovery::ValidateRunId(run_id); !v.ok())
    return ReportArgs("train", v);
  // rollout.engine vllm without URLs: the engines, started now so that
  // their start-up (a minute) overlaps the workers' set-up and SFT; kept
  // across the workers' restarts.
  std::optional<EnginePlan> engines;
  std::optional<EngineKeeper> keeper;
  if (c.rollout.engine == "vllm" && c.rollout.vllm.urls.empty()) {
    Result<EnginePlan> plan = PrepareEngines(c, run_id);
    if (!plan.ok()) return FailConfig(plan.status());
    Result<EngineKeeper> k = EngineKeeper::Start(c, *plan);
    if (!k.ok()) return ReportArgs("train", k.status());
    engines = std::move(plan).value();
    keeper.emplace(std::move(k).value());
  }
  double detect_seconds = 0;
  std::string restart_cause;  // A metrics::RestartCause label value.
  for (int attempt = 0;; ++attempt) {
    Result<int> port = PickFreePort();
    if (!port.ok()) return ReportArgs("train", port.status());
    LaunchOptions o;
    o.nproc = static_cast<int>(nodes.size());
    o.argv = f.worker_argv;
    o.env = {{kConfigEnv, trainer::ToYaml(c)},
             {"HY_RESTART_COUNT", std::to_string(attempt)},
             {"HY_RUN_ID", run_id}};
    if (attempt > 0) {
      o.env.push_back({"HY_DETECT_SECONDS", std::to_string(detect_seconds)});
      o.env.push_back({"HY_RESTART_CAUSE", restart_cause});
    }
    if (engines) {
      for (auto& kv : engines->WorkerEnv()) o.env.push_back(kv);
      o.watch_pid = keeper->pid();
      o.watch_name = "the vLLM engine keeper";
    }
    o.node_ids = nodes;
    o.master_port = *port;
    o.peer_exit_seconds = c.checkpoint.heartbeat_timeout_ms / 1000.0 + 5;
    std::cerr << "hyctl train: starting " << o.nproc << " workers on nodes "
              << NodeList(nodes) << ", store " << root
              << ", rendezvous 127.0.0.1:" << *port << ", run " << run_id
              << (attempt > 0 ? ", restart " + std::to_string(attempt) : "")
              << std::endl;
    int code = kExitOk;
    LaunchResult res;
    o.stop_grace_seconds = c.trainer.stop_grace_seconds;
    const Status s = RunLauncher(o, &code, &res);
    if (s.ok() && res.stopped_by != 0) {
      if (checkpoint::Checkpointer::LatestCommittedStep(root).ok()) {
        std::cerr << "hyctl train: stopped by " << strsignal(res.stopped_by)
                  << "; the workers saved and exited (continue with "
                     "--resume "
                  << root << ")" << std::endl;
      } else {
        std::cerr << "hyctl train: stopped by " << strsignal(res.stopped_by)
                  << " before anything was saved (start it again; there is "
                     "nothing to resume)"
                  << std::endl;
      }
    }
    if (s.ok()) return kExitOk;
    std::cerr << "hyctl train: " << s.message() << std::endl;
    if (s.code() != StatusCode::kAborted) return kExitError;
    if (res.first_failed == kWatchedFailed) {
      keeper->Reaped();
      if (Exited(res.watch_status, kExitConfig)) {
        std::cerr << "hyctl train: configuration error (the vLLM engine "
                     "keeper says why above); not restarting"
                  << std::endl;
        return kExitConfig;
      }
      std::cerr << "hyctl train: the vLLM engines cannot be kept running; "
                   "not restarting"
                << std::endl;
      return kExitError;
    }
    if (res.first_failed < 0) return code;  // Stopped by a signal.
    for (int r = 0; r < o.nproc; ++r) {
      if (Exited(res.wait_status[r], kExitConfig)) {
        std::cerr << "hyctl train: configuration error (rank " << r
                  << " says why above); not restarting" << std::endl;
        return kExitConfig;
      }
    }
    for (int r = 0; r < o.nproc; ++r) {
      if (Exited(res.wait_status[r], kExitCheckpointFailed)) {
        std::cerr << "hyctl train: checkpoints cannot be written (said "
                     "above); not restarting: a restart cannot make room"
                  << std::endl;
        return kExitCheckpointFailed;
      }
    }
    std::vector<int> survivors;
    std::string lost;
    bool unrecoverable = false;
    for (int r = 0; r < o.nproc; ++r) {
      const int st = res.wait_status[r];
      unrecoverable = unrecoverable ||
                      Exited(st, recovery::kExitUnrecoverable) ||
                      Exited(st, kExitUsage);
      std::error_code ec;
      if (fs::exists(recovery::NodeDir(root, nodes[r]), ec)) {
        survivors.push_back(nodes[r]);  // A process died, not the machine.
      } else {
        lost += (lost.empty() ? "" : ", ") + std::string("node ") +
                std::to_string(nodes[r]) + " (rank " + std::to_string(r) + ")";
      }
    }
    if (unrecoverable) {
      std::cerr << "hyctl train: a worker found the failure unrecoverable; "
                   "not restarting"
                << std::endl;
      return recovery::kExitUnrecoverable;
    }
    if (attempt >= f.max_restarts) {
      std::cerr << "hyctl train: giving up after " << attempt
                << " restart(s) (--max-restarts " << f.max_restarts << ")"
                << std::endl;
      return code == 0 ? kExitError : code;
    }
    if (static_cast<int>(survivors.size()) < f.min_nodes) {
      std::cerr << "hyctl train: lost " << lost << "; only " << survivors.size()
                << " node(s) left, fewer than --min-nodes " << f.min_nodes
                << "; not restarting" << std::endl;
      return recovery::kExitUnrecoverable;
    }
    detect_seconds = res.stop_seconds;
    restart_cause = std::string(
        metrics::LabelValue(lost.empty() ? metrics::RestartCause::kProcessExit
                                         : metrics::RestartCause::kNodeLost));
    std::cerr << "hyctl train: lost " << (lost.empty() ? "no node" : lost)
              << "; the others stopped " << res.stop_seconds
              << " s after the failure; restarting on " << survivors.size()
              << " node(s)" << std::endl;
    nodes = std::move(survivors);
  }
}

}  // namespace hy::launcher
