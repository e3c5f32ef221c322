#include "hy/metrics/hy_metrics.h"

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

Result<Histogram*> AddOne(Family<Histogram>* f, const Labels& labels) {
  return f->Add(labels);
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
  return Lookup(v,
                std::array<std::string_view, 3>{"raw", "bf16", "sparse_delta"});
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

BucketBoundaries ShortDurationBuckets() {
  return {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2,
          0.5,   1,     2,     5,    10,   20,   30,  60};
}

BucketBoundaries LongDurationBuckets() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,   2.5,
          5,    10,    25,   50,  100,  250, 300, 600};
}

Result<HyMetrics> HyMetrics::Register(Registry& r) {
  HyMetrics m;

  // Reshard (train <-> rollout layouts).
  HY_ASSIGN_OR_RETURN(
      m.reshard_duration_family,
      BuildHistogram()
          .Name("hy_reshard_duration_seconds")
          .Help("Wall time of one reshard between layouts, plan to unpack.")
          .LabelNames({"direction", "transport", "wire"})
          .Buckets(ShortDurationBuckets())
          .Register(r));
  HY_ASSIGN_OR_RETURN(
      auto* phase,
      BuildHistogram()
          .Name("hy_reshard_phase_seconds")
          .Help("Wall time of one phase of a reshard (plan, pack, transfer, "
                "unpack).")
          .LabelNames({"phase"})
          .Buckets(ShortDurationBuckets())
          .Register(r));
  for (size_t i = 0; i < m.reshard_phase_.size(); ++i) {
    auto p = static_cast<ReshardPhase>(i);
    HY_ASSIGN_OR_RETURN(m.reshard_phase_[i],
                        AddOne(phase, {{"phase", std::string(LabelValue(p))}}));
  }
  HY_ASSIGN_OR_RETURN(
      auto* bytes,
      BuildCounter()
          .Name("hy_reshard_bytes_total")
          .Help("Bytes moved by reshards, by kind: local (copied within a "
                "rank), node (between ranks of one node), remote (across "
                "nodes).")
          .LabelNames({"kind"})
          .Register(r));
  for (size_t i = 0; i < m.reshard_bytes_.size(); ++i) {
    auto k = static_cast<ReshardBytesKind>(i);
    HY_ASSIGN_OR_RETURN(m.reshard_bytes_[i],
                        bytes->Add({{"kind", std::string(LabelValue(k))}}));
  }

  // Checkpoints (statestore).
  HY_ASSIGN_OR_RETURN(
      auto* save,
      BuildHistogram()
          .Name("hy_checkpoint_save_duration_seconds")
          .Help("Wall time to encode and write one checkpoint version, "
                "commit excluded.")
          .Buckets(LongDurationBuckets())
          .Register(r));
  HY_ASSIGN_OR_RETURN(m.checkpoint_save_duration, save->Add({}));
  HY_ASSIGN_OR_RETURN(
      auto* commit,
      BuildHistogram()
          .Name("hy_checkpoint_commit_duration_seconds")
          .Help("Wall time to commit one checkpoint version atomically across "
                "ranks.")
          .Buckets(ShortDurationBuckets())
          .Register(r));
  HY_ASSIGN_OR_RETURN(m.checkpoint_commit_duration, commit->Add({}));
  HY_ASSIGN_OR_RETURN(
      auto* written,
      BuildCounter()
          .Name("hy_checkpoint_written_bytes_total")
          .Help("Bytes written to the store for checkpoints, after bf16 cast, "
                "delta and compression.")
          .Register(r));
  HY_ASSIGN_OR_RETURN(m.checkpoint_written_bytes, written->Add({}));
  HY_ASSIGN_OR_RETURN(
      auto* logical,
      BuildCounter()
          .Name("hy_checkpoint_logical_bytes_total")
          .Help("Raw bytes of the tensors checkpointed, before encoding (the "
                "compression ratio is logical / written).")
          .Register(r));
  HY_ASSIGN_OR_RETURN(m.checkpoint_logical_bytes, logical->Add({}));
  HY_ASSIGN_OR_RETURN(
      auto* last_step,
      BuildGauge()
          .Name("hy_checkpoint_last_committed_step")
          .Help("Training step of the newest committed checkpoint version.")
          .Register(r));
  HY_ASSIGN_OR_RETURN(m.checkpoint_last_committed_step, last_step->Add({}));

  // Recovery.
  HY_ASSIGN_OR_RETURN(
      auto* recovery,
      BuildHistogram()
          .Name("hy_recovery_duration_seconds")
          .Help("Wall time of one phase of a recovery after a lost rank "
                "(detect, plan, read, reshard, replicate, resume).")
          .LabelNames({"phase"})
          .Buckets(LongDurationBuckets())
          .Register(r));
  for (size_t i = 0; i < m.recovery_duration_.size(); ++i) {
    auto p = static_cast<RecoveryPhase>(i);
    HY_ASSIGN_OR_RETURN(
        m.recovery_duration_[i],
        AddOne(recovery, {{"phase", std::string(LabelValue(p))}}));
  }
  HY_ASSIGN_OR_RETURN(
      auto* recoveries,
      BuildCounter()
          .Name("hy_recoveries_total")
          .Help("Recoveries run: restarts from the last committed version "
                "after a lost rank.")
          .Register(r));
  HY_ASSIGN_OR_RETURN(m.recoveries, recoveries->Add({}));

  // PPO training (trainer).
  struct GaugeDef {
    Gauge** slot;
    const char* name;
    const char* help;
  };
  const GaugeDef gauges[] = {
      {&m.ppo_reward_mean, "hy_ppo_reward_mean",
       "Mean task reward per sequence in the last PPO iteration."},
      {&m.ppo_kl, "hy_ppo_kl",
       "Mean per-token KL divergence between the policy and the reference "
       "model in the last PPO iteration."},
      {&m.ppo_policy_loss, "hy_ppo_policy_loss",
       "Clipped surrogate policy loss of the last PPO iteration."},
      {&m.ppo_value_loss, "hy_ppo_value_loss",
       "Clipped value loss of the last PPO iteration."},
      {&m.ppo_tokens_per_second, "hy_ppo_tokens_per_second",
       "Tokens generated and trained on per second in the last PPO "
       "iteration."},
  };
  for (const GaugeDef& g : gauges) {
    HY_ASSIGN_OR_RETURN(auto* family,
                        BuildGauge().Name(g.name).Help(g.help).Register(r));
    HY_ASSIGN_OR_RETURN(*g.slot, family->Add({}));
  }

  HY_ASSIGN_OR_RETURN(auto* info,
                      BuildGauge()
                          .Name("hy_build_info")
                          .Help("Always 1; the version label says which hy "
                                "build is running.")
                          .LabelNames({"version"})
                          .Register(r));
  HY_ASSIGN_OR_RETURN(m.build_info,
                      info->Add({{"version", std::string(HyVersion())}}));
  m.build_info->Set(1);
  return m;
}

Result<Histogram*> HyMetrics::ReshardDuration(ReshardDirection direction,
                                              ReshardTransport transport,
                                              ReshardWire wire) const {
  return reshard_duration_family->Add(
      {{"direction", std::string(LabelValue(direction))},
       {"transport", std::string(LabelValue(transport))},
       {"wire", std::string(LabelValue(wire))}});
}

}  // namespace hy::metrics
