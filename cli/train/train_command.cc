// hyctl train (see train_command.h).

#include "train/train_command.h"

#include <signal.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cli_util.h"
#include "hy/launcher/stop_signals.h"
#include "hy/launcher/supervisor.h"
#include "hy/launcher/worker_launcher.h"
#include "hy/metrics/exporter.h"
#include "hy/metrics/file_sd.h"
#include "hy/metrics/hy_metrics.h"
#include "hy/metrics/pusher.h"
#include "hy/recovery/node_layout.h"
#include "hy/trainer/config/config.h"
#include "hy/trainer/ppo/worker.h"
#include "train/train_config.h"
#if HY_WITH_TENSORBOARD
#include "train/train_events.h"
#endif
#include "train/train_output.h"

namespace hy::cli {
namespace {

namespace fs = std::filesystem;

using trainer::TrainConfig;

// Prometheus file-based service discovery of the ranks' exporters, in the
// store root (see hy/metrics/file_sd.h).
constexpr const char* kTargetsFile = "prometheus-targets.json";


// One rank's metrics endpoints: its exporter (entered in the run's file_sd
// targets) and its Pushgateway client.
struct Endpoints {
  std::unique_ptr<metrics::Exporter> exporter;
  std::unique_ptr<metrics::Pusher> pusher;
  bool push_failed = false;  // Warned once.

  void Push() {
    if (pusher == nullptr) return;
    const Status s = pusher->Push();
    if (!s.ok() && !push_failed) {
      std::cerr << "hyctl train: pushing metrics: " << s.ToString()
                << std::endl;
    }
    push_failed = push_failed || !s.ok();
  }
};

// The run's name: the store root's last path component.
std::string RunName(const std::string& root) {
  fs::path p = fs::path(root).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() || name == "." || name == ".." ? "run" : name;
}

// Starts rank `rank`'s exporter (metrics.port < 0: none; 0: a free port;
// P: port P + rank) and enters it in <root>/prometheus-targets.json, and
// its Pushgateway client (grouping key {job, run, rank}).
Status StartEndpoints(const TrainConfig& c, int rank, int world_size,
                      const std::shared_ptr<metrics::Registry>& registry,
                      Endpoints* e) {
  const std::string& root = c.checkpoint.store_root;
  const std::string run = RunName(root);
  const char* node_env = Env("HY_NODE_ID");
  const std::string node = node_env != nullptr ? node_env : std::to_string(rank);
  if (c.metrics.port >= 0) {
    const int port = c.metrics.port == 0 ? 0 : c.metrics.port + rank;
    HY_ASSIGN_OR_RETURN(e->exporter, metrics::Exporter::Start(
                                         c.metrics.bind, port, registry));
    std::error_code ec;
    fs::create_directories(root, ec);
    HY_RETURN_IF_ERROR(metrics::SetFileSdTarget(
        (fs::path(root) / kTargetsFile).string(), rank, world_size,
        e->exporter->target(), {{"run", run}, {"node", node}}));
    std::cerr << "metrics: " << e->exporter->url() << std::endl;
  }
  if (!c.metrics.pushgateway.empty()) {
    HY_ASSIGN_OR_RETURN(
        e->pusher,
        metrics::Pusher::Create(c.metrics.pushgateway, "hyctl_train",
                                {{"run", run}, {"rank", std::to_string(rank)}},
                                registry));
  }
  return Status::OK();
}

// A restarted worker counts its restart, under the cause the launcher
// gave (HY_RESTART_CAUSE).
void CountRestart(const metrics::HyMetrics& m) {
  const char* count = Env("HY_RESTART_COUNT");
  if (count == nullptr || std::atoi(count) <= 0) return;
  const char* cause = Env("HY_RESTART_CAUSE");
  Result<metrics::RestartCause> c =
      metrics::ParseRestartCause(cause != nullptr ? cause : "process_exit");
  m.restarts(c.ok() ? *c : metrics::RestartCause::kProcessExit)->Increment();
}

// The first SIGINT / SIGTERM a worker gets asks the run to stop after the
// iteration in progress (WorkerOptions::stop_signal). The same stop often
// arrives more than once: a terminal's Ctrl-C and Slurm's scancel signal
// every process of the job, and hyctl forwards its own as well. Repeats
// within kStopRepeatSeconds of the first are absorbed; one after that does
// what the signal always does (ends the process).
volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_stop_at = 0;  // CLOCK_MONOTONIC seconds, the first.

void OnStopSignal(int sig) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // Async-signal-safe.
  if (g_stop_signal == 0) {
    g_stop_at = static_cast<sig_atomic_t>(now.tv_sec);
    g_stop_signal = sig;
    return;
  }
  if (now.tv_sec - g_stop_at <= launcher::kStopRepeatSeconds) return;
  signal(sig, SIG_DFL);
  raise(sig);
}

// Then unblocks them: main and the launcher hold them until here (see
// HoldStopSignals), and one that arrived meanwhile is delivered now.
void CatchStopSignals() {
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  launcher::ReleaseStopSignals();
}

int Work(const TrainConfig& c, const TrainFlags& f) {
  const char* rank_env = Env("RANK");
  const int rank = rank_env != nullptr ? std::atoi(rank_env) : 0;
  const bool json = f.format == "json";
  // First: a stop from here on is a stop (the run checks it before its
  // first iteration and then after each).
  CatchStopSignals();
  auto registry = std::make_shared<metrics::Registry>();
  Result<metrics::HyMetrics> m = metrics::HyMetrics::Register(*registry);
  if (!m.ok()) return ReportArgs("train", m.status());
  CountRestart(*m);
  const char* world_env = Env("WORLD_SIZE");
  const int world_size = world_env != nullptr ? std::atoi(world_env) : 1;
  Endpoints endpoints;
  if (const Status s =
          StartEndpoints(c, rank, std::max(world_size, rank + 1), registry,
                         &endpoints);
      !s.ok()) {
    return Report("train", s);
  }

  std::mutex mu;  // Serializes output (logs may come from other threads).
  trainer::WorkerOptions o;
  o.resume = !f.resume.empty();
  o.allow_other_run = f.allow_other_run;
  o.max_iterations = f.max_iterations;
  o.metrics = &*m;
#if HY_WITH_TENSORBOARD
  // Rank 0 writes the run's TensorBoard events (<store>/tensorboard).
  std::unique_ptr<TrainEvents> events;
  if (rank == 0) {
    events = std::make_unique<TrainEvents>(
        c.checkpoint.store_root, trainer::ToYaml(c),
        [&mu](const std::string& line) {
          std::lock_guard<std::mutex> lock(mu);
          std::cerr << line << std::endl;
        });
  }
#endif
  o.on_iteration = [&](const trainer::IterationReport& r) {
    m->ppo_reward_mean->Set(r.reward_mean);
    m->ppo_kl->Set(r.kl);
    m->ppo_policy_loss->Set(r.policy_loss);
    m->ppo_value_loss->Set(r.value_loss);
    m->ppo_tokens_per_second->Set(r.tokens_per_second);
    m->ppo_entropy->Set(r.entropy);
    m->ppo_exact_match->Set(r.exact_match);
    m->ppo_grad_norm->Set(r.grad_norm);
    m->ppo_iteration->Set(static_cast<double>(r.iteration + 1));
    if (rank == 0) {
      {
        std::lock_guard<std::mutex> lock(mu);
        std::cout << (json ? IterationJson(r)
                           : IterationText(r, c.trainer.total_iterations))
                  << std::endl;
      }
#if HY_WITH_TENSORBOARD
      events->OnIteration(r);
#endif
    }
    endpoints.Push();
  };
  o.on_validation = [&](const trainer::ValidationReport& r) {
    m->validation_exact_match->Set(r.exact_match);
    if (rank != 0) return;
    {
      std::lock_guard<std::mutex> lock(mu);
      std::cout << (json ? ValidationJson(r) : ValidationText(r)) << std::endl;
    }
#if HY_WITH_TENSORBOARD
    events->OnValidation(r);
#endif
  };
  o.log = [&mu](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    std::cerr << line << std::endl;
  };
  o.stop_signal = [] { return static_cast<int>(g_stop_signal); };
  Result<trainer::RunSummary> summary = trainer::RunWorker(c, o);
  endpoints.Push();
  if (!summary.ok()) {
    const Status& e = summary.status();
    Report("train", e);
    // The launcher restarts after a peer failure, not after a loss that
    // no restart can mend.
    if (e.code() == StatusCode::kUnavailable ||
        e.code() == StatusCode::kDeadlineExceeded) {
      return recovery::kExitPeerFailed;
    }
    // Nothing to resume, or no copy left: no restart would help.
    if (e.IsDataLoss() || e.code() == StatusCode::kFailedPrecondition) {
      return recovery::kExitUnrecoverable;
    }
    // The config (its device, data, tokenizer, model) cannot run: the
    // launcher reports it as such and does not restart.
    if (e.IsInvalidArgument()) return kExitConfig;
    return ExitCodeFor(e);
  }
  if (!summary->checkpoint_failure.empty()) {
    if (rank == 0) {
      std::lock_guard<std::mutex> lock(mu);
      std::cerr << "hyctl train: " << summary->checkpoint_failure << std::endl;
    }
    return kExitCheckpointFailed;
  }
  if (rank == 0 && summary->stopped_by != 0 && summary->iterations == 0) {
    std::lock_guard<std::mutex> lock(mu);
    std::cerr << "hyctl train: stopped by " << strsignal(summary->stopped_by)
              << " before the first iteration: nothing was trained"
              << (summary->checkpoint_step >= 0
                      ? "; the run is as it was, committed step " +
                            std::to_string(summary->checkpoint_step)
                      : std::string("; nothing is saved"))
              << std::endl;
  } else if (rank == 0) {
    std::lock_guard<std::mutex> lock(mu);
    (json ? std::cerr : std::cout) << SummaryText(*summary) << std::endl;
    if (summary->stopped_by != 0) {
      std::cerr << "hyctl train: stopped by " << strsignal(summary->stopped_by)
                << " after " << summary->iterations
                << " iteration(s); committed step "
                << summary->checkpoint_step << std::endl;
    }
  }
  return kExitOk;
}

int RunTrain(const TrainFlags& f) {
  const bool worker = f.worker || Env("RANK") != nullptr;
  if (f.from_step >= 0 && f.resume.empty()) {
    return ReportArgs("train", Status::InvalidArgument(
                                   "--from-step needs --resume RUN_ROOT"));
  }
  if (f.from_step >= 0 && worker && Env(kConfigEnv) == nullptr) {
    return ReportArgs(
        "train",
        Status::InvalidArgument(
            "--from-step works under hyctl's own launcher; under torchrun, "
            "remove the newer steps first (hyctl drop RUN_ROOT --step N)"));
  }
  Result<TrainConfig> c = ResolveConfig(f, worker);
  if (!c.ok()) return ReportArgs("train", c.status());
  if (f.print_config) {
    std::cout << trainer::ToYaml(*c) << std::flush;
    return std::cout ? kExitOk : kExitError;
  }
  if (worker) return Work(*c, f);
  Result<std::vector<std::string>> argv = launcher::SelfCommandLine();
  if (!argv.ok()) return ReportArgs("train", argv.status());
  launcher::SuperviseOptions o;
  o.worker_argv = std::move(argv).value();
  o.worker_argv.push_back("--worker");
  o.resume = !f.resume.empty();
  o.from_step = f.from_step;
  o.drop_newer = f.drop_newer;
  o.max_restarts = f.max_restarts;
  o.min_nodes = f.min_nodes;
  return launcher::Supervise(*c, o);
}

}  // namespace

void AddTrainCommand(CLI::App* app, int* exit_code) {
  CLI::App* cmd = app->add_subcommand(
      "train",
      "Train a small Llama-style model with distributed PPO (or GRPO) on a "
      "built-in verifiable-reward task, on trainer.nproc local worker "
      "processes, checkpointing into hy stores. Effective config: defaults "
      "< --config < --set < flags.");
  auto f = std::make_shared<TrainFlags>();
  cmd->add_option("--config", f->config_file,
                  "YAML config (sections model, task, actor, critic, rollout, "
                  "algorithm, trainer, checkpoint, metrics); its relative "
                  "paths are read against its directory");
  cmd->add_option("--set", f->sets,
                  "Override one key, section.key=value (a YAML value), e.g. "
                  "actor.optim.lr=3e-4 or algorithm=grpo; repeatable")
      ->allow_extra_args(false);
  f->nproc_opt =
      cmd->add_option("--nproc", f->nproc, "Worker processes (trainer.nproc)");
  f->iterations_opt = cmd->add_option("--iterations", f->iterations,
                                      "PPO iterations "
                                      "(trainer.total_iterations)");
  f->seed_opt = cmd->add_option("--seed", f->seed, "Seed (trainer.seed)");
  cmd->add_option("--device", f->device,
                  "cpu or cuda (trainer.device); cuda: one GPU per worker, "
                  "GPU LOCAL_RANK mod the visible GPUs");
  cmd->add_option("--rollout-engine", f->rollout_engine,
                  "hy (hy's own decoder) or vllm (vLLM engines hyctl train "
                  "starts, or rollout.vllm.urls) (rollout.engine)")
      ->check(CLI::IsMember({"hy", "vllm"}));
  cmd->add_option("--model", f->model,
                  "Start from a Hugging Face model directory: config.json "
                  "and safetensors of a LlamaForCausalLM, Qwen2ForCausalLM "
                  "or Qwen3ForCausalLM (model.path)");
  cmd->add_option("--data", f->data,
                  "Training prompts, JSON Lines with \"prompt\" and "
                  "\"answer\" (data.train_files; repeatable)");
  cmd->add_option("--val-data", f->val_data,
                  "Held-out prompts decoded greedily before the first and "
                  "after the last iteration (data.val_files; repeatable)");
  f->metrics_port_opt = cmd->add_option(
      "--metrics-port", f->metrics_port,
      "Serve each rank's metrics on metrics.bind (127.0.0.1) port P + rank; "
      "0: a free port per rank, -1: off (metrics.port). The endpoints are "
      "listed in RUN_ROOT/prometheus-targets.json for Prometheus file_sd");
  CLI::Option* store = cmd->add_option(
      "--store", f->store, "The run root, exactly (checkpoint.store_root)");
  CLI::Option* store_root = cmd->add_option(
      "--store-root", f->store_root,
      "Put the run root in DIR/run-YYYYmmdd-HHMMSS (default: runs/)");
  CLI::Option* resume = cmd->add_option(
      "--resume", f->resume,
      "Resume the run in RUN_ROOT from its newest committed step (any "
      "--nproc)");
  store->excludes(store_root);
  resume->excludes(store)->excludes(store_root);
  AddOutputOption(cmd, &f->format, {"text", "json"});
  cmd->add_flag("--print-config", f->print_config,
                "Print the effective config as YAML and exit");
  cmd->add_option("--max-iterations", f->max_iterations,
                  "Stop after N iterations of this run (testing)")
      ->group("");
  cmd->add_option("--from-step", f->from_step,
                  "With --resume: continue from this committed step instead "
                  "of the newest (a roll-back)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--drop-newer", f->drop_newer,
                "With --from-step: remove the steps after it from every "
                "store first (required when there are any: a restart would "
                "go back to them)");
  cmd->add_option("--max-restarts", f->max_restarts,
                  "Restarts on the surviving nodes after a failure")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-nodes", f->min_nodes,
                  "Fewest nodes a restart may run on")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--allow-other-run", f->allow_other_run,
                "Take over stores that belong to another run (another run "
                "id): resume or garbage-collect them on purpose");
  cmd->add_flag("--worker", f->worker, "Run as one worker (internal)")
      ->group("");
  cmd->callback([f, exit_code] { *exit_code = RunTrain(*f); });
}

}  // namespace hy::cli
