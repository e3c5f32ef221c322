// hyctl train: the effective config (see train_config.h).

#include "train/train_config.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "hy/checkpoint/checkpoint.h"
#include "hy/recovery/run_identity.h"
#include "hy/trainer/hf/hf_model.h"

namespace hy::cli {

using trainer::TrainConfig;

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// `base`/run-YYYYmmdd-HHMMSS (local time), with -2, -3, ... appended if
// that exists already; under torchrun `base`/torchrun-<run id>
// (TORCHELASTIC_RUN_ID or HY_RUN_ID), which every rank of the job, and no
// other job, computes alike. Returns InvalidArgument under torchrun without
// a run id.
Result<std::string> DefaultStoreRoot(const std::string& base, bool torchrun) {
  if (torchrun) {
    const std::string run_id = recovery::RunIdFromEnv();
    if (run_id.empty()) {
      return Status::InvalidArgument(
          "RANK is set but no run id is: give torchrun --rdzv-id (or "
          "--standalone), set HY_RUN_ID, or name the store with --store");
    }
    HY_RETURN_IF_ERROR(recovery::ValidateRunId(run_id));
    return base + "/torchrun-" + run_id;
  }
  const std::time_t now = std::time(nullptr);
  std::tm tm;
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "run-%Y%m%d-%H%M%S", &tm);
  std::string root = base + "/" + stamp;
  for (int i = 2; Exists(root) && i < 1000; ++i) {
    root = base + "/" + stamp + "-" + std::to_string(i);
  }
  return root;
}

// The path keys a config file sets (those it changed from `before`) are
// read against the file's directory `dir`; absolute ones stay.
void ResolveAgainst(const std::filesystem::path& dir, const TrainConfig& before,
                    TrainConfig* c) {
  auto fix = [&dir](std::string* p) {
    if (p->empty() || p->front() == '/') return;
    *p = (dir / *p).lexically_normal().string();
  };
  if (c->model.path != before.model.path) fix(&c->model.path);
  if (c->data.tokenizer != before.data.tokenizer) fix(&c->data.tokenizer);
  if (c->data.reward_file != before.data.reward_file) {
    fix(&c->data.reward_file);
  }
  if (c->checkpoint.store_root != before.checkpoint.store_root) {
    fix(&c->checkpoint.store_root);
  }
  for (auto files :
       {std::make_pair(&c->data.train_files, &before.data.train_files),
        std::make_pair(&c->data.val_files, &before.data.val_files)}) {
    if (*files.first == *files.second) continue;
    for (std::string& f : *files.first) fix(&f);
  }
}

Status Prefixed(const std::string& prefix, const Status& s) {
  if (s.ok()) return s;
  return Status(s.code(), prefix + std::string(s.message()));
}

}  // namespace

Result<TrainConfig> ResolveConfig(const TrainFlags& f, bool worker) {
  if (const char* yaml = worker ? Env(kConfigEnv) : nullptr) {
    Result<TrainConfig> c = trainer::ParseConfigYaml(yaml);
    if (!c.ok()) return Prefixed(std::string(kConfigEnv) + ": ", c.status());
    return c;
  }
  TrainConfig c;
  if (!f.resume.empty() && f.config_file.empty()) {
    // Resuming without a config file continues the run as it was
    // configured (flags and --set still override).
    auto reader = checkpoint::CheckpointReader::Open(
        f.resume, /*step=*/-1, /*generation=*/-1, f.allow_other_run);
    if (reader.ok()) {
      auto stored = (*reader)->ReadBlob("trainer.config");
      if (stored.ok()) {
        HY_RETURN_IF_ERROR(Prefixed(f.resume + " trainer.config: ",
                                    trainer::MergeConfigYaml(*stored, &c)));
      }
    }
  }
  if (!f.config_file.empty()) {
    std::ifstream in(f.config_file);
    if (!in) {
      return Status::NotFound("cannot read config file " + f.config_file +
                              ": " + std::strerror(errno));
    }
    std::stringstream text;
    text << in.rdbuf();
    const TrainConfig before = c;
    HY_RETURN_IF_ERROR(Prefixed(f.config_file + ": ",
                                trainer::MergeConfigYaml(text.str(), &c)));
    ResolveAgainst(std::filesystem::path(f.config_file).parent_path(), before,
                   &c);
  }
  for (const std::string& set : f.sets) {
    HY_RETURN_IF_ERROR(
        Prefixed("--set " + set + ": ", trainer::ApplyOverride(&c, set)));
  }
  if (!f.model.empty()) c.model.path = f.model;
  if (!f.device.empty()) c.trainer.device = f.device;
  if (!f.rollout_engine.empty()) c.rollout.engine = f.rollout_engine;
  if (!f.data.empty()) c.data.train_files = f.data;
  if (!f.val_data.empty()) c.data.val_files = f.val_data;
  if (f.nproc_opt->count()) c.trainer.nproc = f.nproc;
  if (f.iterations_opt->count()) c.trainer.total_iterations = f.iterations;
  if (f.seed_opt->count()) c.trainer.seed = f.seed;
  if (f.metrics_port_opt->count()) c.metrics.port = f.metrics_port;
  std::string& root = c.checkpoint.store_root;
  if (!f.store.empty()) {
    root = f.store;
  } else if (!f.resume.empty()) {
    root = f.resume;
  } else if (!f.store_root.empty() || root.empty()) {
    HY_ASSIGN_OR_RETURN(
        root, DefaultStoreRoot(f.store_root.empty() ? "runs" : f.store_root,
                               worker && Env("RANK") != nullptr));
  }
  HY_RETURN_IF_ERROR(trainer::ResolveModelPath(&c.model));
  HY_RETURN_IF_ERROR(trainer::ValidateConfig(c));
  return c;
}

}  // namespace hy::cli
