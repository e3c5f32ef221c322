#include "hy/metrics/hy_metrics.h"

#include <exception>
#include <map>
#include <stdexcept>
#include <string>

#ifndef HY_VERSION
#error "HY_VERSION must be defined by the build (metrics/CMakeLists.txt)"
#endif

namespace hy::metrics {
namespace {

template <typename Enum, size_t N>
std::string_view Lookup(Enum v, const std::array<std::string_view, N>& names) {
  static_assert(N == static_cast<size_t>(Enum::kCount));
  return names[static_cast<size_t>(v)];
}

constexpr std::array<std::string_view, 2> kCauses = {"process_exit",
                                                     "node_lost"};

std::vector<FamilyDef> MakeCatalogue() {
  using T = MetricType;
  const BucketBoundaries s = ShortDurationBuckets();
  const BucketBoundaries l = LongDurationBuckets();
  return {
      // Reshard (train <-> rollout layouts).
      {"hy_reshard_duration_seconds",
       T::kHistogram,
       "Wall time of one reshard between layouts, plan to unpack.",
       {"direction", "transport", "wire"},
       s},
      {"hy_reshard_phase_seconds",
       T::kHistogram,
       "Wall time of one phase of a reshard (plan, pack, transfer, unpack).",
       {"phase"},
       s},
      {"hy_reshard_bytes_total",
       T::kCounter,
       "Logical bytes moved by reshards (wire dtype, before sparse delta), "
       "by kind: local (copied within a rank), node (between ranks of one "
       "node), remote (across nodes).",
       {"kind"},
       {}},
      {"hy_reshard_logical_bytes_total",
       T::kCounter,
       "Logical bytes this rank sent in reshards: what a dense send of the "
       "wire dtype would carry, local copies excluded.",
       {},
       {}},
      {"hy_reshard_wire_bytes_total",
       T::kCounter,
       "Bytes this rank actually sent in reshards, by wire kind: raw, bf16, "
       "delta (sparse delta against the last weights sent).",
       {"wire"},
       {}},
      // Checkpoints (statestore, trainer).
      {"hy_checkpoint_save_duration_seconds",
       T::kHistogram,
       "Wall time to encode and write one checkpoint (a step's state), "
       "commit excluded.",
       {},
       l},
      {"hy_checkpoint_commit_duration_seconds",
       T::kHistogram,
       "Wall time to commit one checkpoint atomically across ranks.",
       {},
       s},
      {"hy_checkpoint_blocking_seconds",
       T::kHistogram,
       "Wall time the training loop was blocked by one checkpoint (save, "
       "commit and replication as the step waits for them).",
       {},
       l},
      {"hy_checkpoint_written_bytes_total",
       T::kCounter,
       "Bytes written to the store for checkpoints, after bf16 cast, delta "
       "and compression.",
       {},
       {}},
      {"hy_checkpoint_logical_bytes_total",
       T::kCounter,
       "Raw bytes of the tensors checkpointed, before encoding (the "
       "compression ratio is logical / written).",
       {},
       {}},
      {"hy_checkpoint_last_committed_step",
       T::kGauge,
       "Training step of the newest committed checkpoint (-1: none yet).",
       {},
       {}},
      {"hy_checkpoint_last_replicated_step",
       T::kGauge,
       "Training step of the newest checkpoint fully replicated to this "
       "rank's peers (-1: none yet).",
       {},
       {}},
      {"hy_replication_lag_steps",
       T::kGauge,
       "Latest committed step minus latest fully replicated step.",
       {},
       {}},
      {"hy_checkpoint_failures_total",
       T::kCounter,
       "Checkpoints this rank could not save, commit or replicate, by cause "
       "(no_space, io, peer, other).",
       {"cause"},
       {}},
      {"hy_damaged_chunks_total",
       T::kCounter,
       "Stored chunks found damaged (checksum or decode failure) by a read, "
       "a read-back before reuse or a verify, each counted once per store "
       "that holds it; each is quarantined and written again by the next "
       "save that needs it.",
       {},
       {}},
      // Liveness, recovery.
      {"hy_peer_heartbeat_age_seconds",
       T::kGauge,
       "Seconds since this rank last saw the heartbeat of each peer rank.",
       {"peer"},
       {}},
      {"hy_recovery_duration_seconds",
       T::kHistogram,
       "Wall time of one phase of a recovery after a lost rank (detect, "
       "plan, read, reshard, replicate, resume).",
       {"phase"},
       l},
      {"hy_recoveries_total",
       T::kCounter,
       "Recoveries run: restarts from the last committed step after a "
       "lost rank, by cause (process_exit, node_lost).",
       {"cause"},
       {}},
      {"hy_restarts_total",
       T::kCounter,
       "Times this worker was started again by hyctl train after a failure, "
       "by cause (process_exit, node_lost).",
       {"cause"},
       {}},
      // Training.
      {"hy_iteration_duration_seconds",
       T::kHistogram,
       "Wall time of one training iteration (rollout, update, checkpoint).",
       {},
       l},
      // Rollout engines (rollout.engine vllm).
      {"hy_rollout_weight_sync_seconds",
       T::kHistogram,
       "Wall time of one weight sync into the rollout engines: the ranks' "
       "writes into the shared weight file and every engine's load.",
       {},
       s},
      {"hy_rollout_weight_sync_bytes_total",
       T::kCounter,
       "Bytes the ranks wrote into the engines' shared weight file or sent "
       "to it over c10d.",
       {},
       {}},
      {"hy_rollout_engine_restarts_total",
       T::kCounter,
       "Rollout engine failures this rank waited out (a restarted or "
       "revived engine, reloaded with the current weights).",
       {},
       {}},
      {"hy_rollout_weight_version",
       T::kGauge,
       "The weight version (trainer step) the rollout engines hold; -1 "
       "before the first sync.",
       {},
       {}},
      {"hy_ppo_reward_mean",
       T::kGauge,
       "Mean task reward per sequence in the last PPO iteration.",
       {},
       {}},
      {"hy_ppo_kl",
       T::kGauge,
       "Mean per-token KL divergence between the policy and the reference "
       "model in the last PPO iteration.",
       {},
       {}},
      {"hy_ppo_policy_loss",
       T::kGauge,
       "Clipped surrogate policy loss of the last PPO iteration.",
       {},
       {}},
      {"hy_ppo_value_loss",
       T::kGauge,
       "Clipped value loss of the last PPO iteration.",
       {},
       {}},
      {"hy_ppo_tokens_per_second",
       T::kGauge,
       "Tokens generated and trained on per second in the last PPO "
       "iteration.",
       {},
       {}},
      {"hy_ppo_entropy",
       T::kGauge,
       "Mean per-token entropy of the policy in the last PPO iteration.",
       {},
       {}},
      {"hy_ppo_exact_match",
       T::kGauge,
       "Fraction of the last PPO iteration's responses with reward 1.",
       {},
       {}},
      {"hy_ppo_grad_norm",
       T::kGauge,
       "Actor gradient norm (last minibatch, before clipping) of the last "
       "PPO iteration.",
       {},
       {}},
      {"hy_ppo_iteration",
       T::kGauge,
       "The last PPO iteration finished, counting from 1 (as hyctl train "
       "prints it); 0 before the first.",
       {},
       {}},
      {"hy_validation_exact_match",
       T::kGauge,
       "Held-out exact-match rate (greedy decoding of data.val_files) of the "
       "last validation; -1 before the first (or without held-out data).",
       {},
       {}},
      {"hy_build_info",
       T::kGauge,
       "Always 1; the version label says which hy build is running.",
       {"version"},
       {}},
  };
}

// The families of one registration, by name.
struct Families {
  std::map<std::string, prometheus::Family<Counter>*> counters;
  std::map<std::string, prometheus::Family<Gauge>*> gauges;
  std::map<std::string, prometheus::Family<Histogram>*> histograms;
};

// Registers every family of the catalogue. Throws what prometheus-cpp
// throws.
Families RegisterFamilies(Registry& r) {
  Families f;
  for (const FamilyDef& d : Catalogue()) {
    switch (d.type) {
      case MetricType::kCounter:
        f.counters[d.name] =
            &prometheus::BuildCounter().Name(d.name).Help(d.help).Register(r);
        break;
      case MetricType::kGauge:
        f.gauges[d.name] =
            &prometheus::BuildGauge().Name(d.name).Help(d.help).Register(r);
        break;
      case MetricType::kHistogram:
        f.histograms[d.name] =
            &prometheus::BuildHistogram().Name(d.name).Help(d.help).Register(
                r);
        break;
    }
  }
  return f;
}

const BucketBoundaries& BucketsOf(const std::string& name) {
  for (const FamilyDef& d : Catalogue()) {
    if (d.name == name) return d.buckets;
  }
  throw std::logic_error("no family " + name);
}

Histogram* AddHistogram(const Families& f, const std::string& name,
                        const Labels& labels) {
  return &f.histograms.at(name)->Add(labels, BucketsOf(name));
}

Status FromException(const std::exception& e) {
  const std::string what = e.what();
  if (what.find("different type") != std::string::npos) {
    return Status::AlreadyExists("metrics: " + what);
  }
  return Status::InvalidArgument("metrics: " + what);
}

}  // namespace

std::string_view HyVersion() { return HY_VERSION; }

std::string_view LabelValue(ReshardDirection v) {
  return Lookup(v, std::array<std::string_view, 2>{"train_to_rollout",
                                                   "rollout_to_train"});
}
std::string_view LabelValue(ReshardTransport v) {
  return Lookup(v, std::array<std::string_view, 3>{"local", "gloo", "nccl"});
}
std::string_view LabelValue(ReshardWire v) {
  return Lookup(v, std::array<std::string_view, 3>{"raw", "bf16", "delta"});
}
std::string_view LabelValue(ReshardPhase v) {
  return Lookup(
      v, std::array<std::string_view, 4>{"plan", "pack", "transfer", "unpack"});
}
std::string_view LabelValue(ReshardBytesKind v) {
  return Lookup(v, std::array<std::string_view, 3>{"local", "node", "remote"});
}
std::string_view LabelValue(RecoveryPhase v) {
  return Lookup(
      v, std::array<std::string_view, 6>{"detect", "plan", "read", "reshard",
                                         "replicate", "resume"});
}
std::string_view LabelValue(RestartCause v) { return Lookup(v, kCauses); }
std::string_view LabelValue(CheckpointFailureCause v) {
  return Lookup(
      v, std::array<std::string_view, 4>{"no_space", "io", "peer", "other"});
}

Result<RestartCause> ParseRestartCause(std::string_view value) {
  for (size_t i = 0; i < kCauses.size(); ++i) {
    if (kCauses[i] == value) return static_cast<RestartCause>(i);
  }
  return Status::InvalidArgument("unknown restart cause \"" +
                                 std::string(value) +
                                 "\" (process_exit or node_lost)");
}

BucketBoundaries ShortDurationBuckets() {
  return {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2,
          0.5,   1,     2,     5,    10,   20,   30,  60};
}

BucketBoundaries LongDurationBuckets() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,   2.5,
          5,    10,    25,   50,  100,  250, 300, 600};
}

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

const std::vector<FamilyDef>& Catalogue() {
  static const std::vector<FamilyDef>* catalogue =
      new std::vector<FamilyDef>(MakeCatalogue());
  return *catalogue;
}

uint64_t Count(const Histogram& histogram) {
  return histogram.Collect().histogram.sample_count;
}

double Sum(const Histogram& histogram) {
  return histogram.Collect().histogram.sample_sum;
}

Result<HyMetrics> HyMetrics::Register(Registry& r) {
  HyMetrics m;
  try {
    const Families f = RegisterFamilies(r);
    auto counter = [&](const char* name, const Labels& labels = {}) {
      return &f.counters.at(name)->Add(labels);
    };
    auto gauge = [&](const char* name) { return &f.gauges.at(name)->Add({}); };

    m.reshard_duration_family = f.histograms.at("hy_reshard_duration_seconds");
    for (size_t i = 0; i < m.reshard_phase_.size(); ++i) {
      const auto p = static_cast<ReshardPhase>(i);
      m.reshard_phase_[i] =
          AddHistogram(f, "hy_reshard_phase_seconds",
                       {{"phase", std::string(LabelValue(p))}});
    }
    for (size_t i = 0; i < m.reshard_bytes_.size(); ++i) {
      const auto k = static_cast<ReshardBytesKind>(i);
      m.reshard_bytes_[i] = counter("hy_reshard_bytes_total",
                                    {{"kind", std::string(LabelValue(k))}});
    }
    m.reshard_logical_bytes = counter("hy_reshard_logical_bytes_total");
    for (size_t i = 0; i < m.reshard_wire_bytes_.size(); ++i) {
      const auto w = static_cast<ReshardWire>(i);
      m.reshard_wire_bytes_[i] = counter(
          "hy_reshard_wire_bytes_total", {{"wire", std::string(LabelValue(w))}});
    }

    m.checkpoint_save_duration =
        AddHistogram(f, "hy_checkpoint_save_duration_seconds", {});
    m.checkpoint_commit_duration =
        AddHistogram(f, "hy_checkpoint_commit_duration_seconds", {});
    m.checkpoint_blocking =
        AddHistogram(f, "hy_checkpoint_blocking_seconds", {});
    m.checkpoint_written_bytes = counter("hy_checkpoint_written_bytes_total");
    m.checkpoint_logical_bytes = counter("hy_checkpoint_logical_bytes_total");
    // Both steps read -1 until a version is committed (replicated), as 0
    // is a step; set once, when first registered.
    const bool fresh =
        !f.gauges.at("hy_checkpoint_last_committed_step")->Has({});
    m.checkpoint_last_committed_step =
        gauge("hy_checkpoint_last_committed_step");
    m.checkpoint_last_replicated_step =
        gauge("hy_checkpoint_last_replicated_step");
    m.replication_lag_steps = gauge("hy_replication_lag_steps");
    m.damaged_chunks = counter("hy_damaged_chunks_total");
    for (size_t i = 0; i < m.checkpoint_failures_.size(); ++i) {
      m.checkpoint_failures_[i] = counter(
          "hy_checkpoint_failures_total",
          {{"cause", std::string(LabelValue(
                         static_cast<CheckpointFailureCause>(i)))}});
    }
    if (fresh) {
      m.checkpoint_last_committed_step->Set(-1);
      m.checkpoint_last_replicated_step->Set(-1);
    }

    m.peer_heartbeat_age_family = f.gauges.at("hy_peer_heartbeat_age_seconds");
    for (size_t i = 0; i < m.recovery_duration_.size(); ++i) {
      const auto p = static_cast<RecoveryPhase>(i);
      m.recovery_duration_[i] =
          AddHistogram(f, "hy_recovery_duration_seconds",
                       {{"phase", std::string(LabelValue(p))}});
    }
    for (size_t i = 0; i < m.recoveries_.size(); ++i) {
      const Labels cause = {
          {"cause", std::string(LabelValue(static_cast<RestartCause>(i)))}};
      m.recoveries_[i] = counter("hy_recoveries_total", cause);
      m.restarts_[i] = counter("hy_restarts_total", cause);
    }

    m.iteration_duration = AddHistogram(f, "hy_iteration_duration_seconds", {});
    m.weight_sync_duration =
        AddHistogram(f, "hy_rollout_weight_sync_seconds", {});
    m.weight_sync_bytes = counter("hy_rollout_weight_sync_bytes_total", {});
    m.engine_restarts = counter("hy_rollout_engine_restarts_total", {});
    const bool fresh_version =
        !f.gauges.at("hy_rollout_weight_version")->Has({});
    m.weight_version = gauge("hy_rollout_weight_version");
    if (fresh_version) m.weight_version->Set(-1);
    m.ppo_reward_mean = gauge("hy_ppo_reward_mean");
    m.ppo_kl = gauge("hy_ppo_kl");
    m.ppo_policy_loss = gauge("hy_ppo_policy_loss");
    m.ppo_value_loss = gauge("hy_ppo_value_loss");
    m.ppo_tokens_per_second = gauge("hy_ppo_tokens_per_second");
    m.ppo_entropy = gauge("hy_ppo_entropy");
    m.ppo_exact_match = gauge("hy_ppo_exact_match");
    m.ppo_grad_norm = gauge("hy_ppo_grad_norm");
    m.ppo_iteration = gauge("hy_ppo_iteration");
    // -1 until the first validation, set once, when first registered.
    const bool fresh_validation =
        !f.gauges.at("hy_validation_exact_match")->Has({});
    m.validation_exact_match = gauge("hy_validation_exact_match");
    if (fresh_validation) m.validation_exact_match->Set(-1);
    m.build_info = &f.gauges.at("hy_build_info")
                        ->Add({{"version", std::string(HyVersion())}});
    m.build_info->Set(1);
  } catch (const std::exception& e) {
    return FromException(e);
  }
  return m;
}

Result<Histogram*> HyMetrics::ReshardDuration(ReshardDirection direction,
                                              ReshardTransport transport,
                                              ReshardWire wire) const {
  try {
    return &reshard_duration_family->Add(
        {{"direction", std::string(LabelValue(direction))},
         {"transport", std::string(LabelValue(transport))},
         {"wire", std::string(LabelValue(wire))}},
        ShortDurationBuckets());
  } catch (const std::exception& e) {
    return FromException(e);
  }
}

Result<Gauge*> HyMetrics::PeerHeartbeatAge(int peer_rank) const {
  try {
    return &peer_heartbeat_age_family->Add(
        {{"peer", std::to_string(peer_rank)}});
  } catch (const std::exception& e) {
    return FromException(e);
  }
}

}  // namespace hy::metrics
