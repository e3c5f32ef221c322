// HyMetrics: the catalogue of every metric hy exports, in one place, so that
// modules, `hyctl metrics`, docs/metrics.md and the Grafana dashboard agree
// on names, types, labels and buckets.
//
// Conventions: names start with "hy_", use base units (seconds, bytes),
// counters end in "_total"; labels take values from the closed sets below,
// never per-step, per-tensor or per-rank values.
//
//   HY_ASSIGN_OR_RETURN(auto m, hy::metrics::HyMetrics::Register(*registry));
//   m.reshard_bytes(hy::metrics::ReshardBytesKind::kRemote)->Increment(n);
//   hy::metrics::ScopedTimer t(m.checkpoint_commit_duration);
//
// Ownership: HyMetrics is a cheap bundle of pointers into the Registry it
// was registered on; they are valid for that Registry's lifetime. Copy it
// freely.
//
// Thread-safety: the pointers' metrics are lock-free; ReshardDuration takes
// its family's mutex (cache the result where it is hot).

#ifndef HY_METRICS_HY_METRICS_H_
#define HY_METRICS_HY_METRICS_H_

#include <array>
#include <string_view>

#include "hy/common/result.h"
#include "hy/metrics/registry.h"

namespace hy::metrics {

// hy's version, the value of hy_build_info's "version" label.
std::string_view HyVersion();

enum class ReshardDirection { kTrainToRollout, kRolloutToTrain, kCount };
enum class ReshardTransport { kLocal, kGloo, kNccl, kCount };
enum class ReshardWire { kRaw, kBf16, kSparseDelta, kCount };
enum class ReshardPhase { kPlan, kPack, kTransfer, kUnpack, kCount };
enum class ReshardBytesKind { kLocal, kNode, kRemote, kCount };
enum class RecoveryPhase {
  kDetect,
  kPlan,
  kRead,
  kReshard,
  kReplicate,
  kResume,
  kCount
};

// The label value of each enumerator ("train_to_rollout", "gloo",
// "sparse_delta", "transfer", "remote", "replicate", ...).
// REQUIRES: the argument is not kCount.
std::string_view LabelValue(ReshardDirection v);
std::string_view LabelValue(ReshardTransport v);
std::string_view LabelValue(ReshardWire v);
std::string_view LabelValue(ReshardPhase v);
std::string_view LabelValue(ReshardBytesKind v);
std::string_view LabelValue(RecoveryPhase v);

// Bucket bounds, in seconds.
// 1-2-5 steps from 1 ms to 60 s: reshards, reshard phases, commits.
BucketBoundaries ShortDurationBuckets();
// 1-2.5-5 steps from 10 ms to 10 min: checkpoint saves, recovery phases.
BucketBoundaries LongDurationBuckets();

struct HyMetrics {
  // Registers every hy family on `registry` (idempotent: registering twice
  // returns the same metrics), creates the children of closed label sets
  // (phases, byte kinds) at zero, and sets hy_build_info{version} to 1.
  // Returns the Registry's error if one of the names is taken by a
  // different family.
  static Result<HyMetrics> Register(Registry& registry);

  // hy_reshard_duration_seconds{direction,transport,wire}: created on first
  // use. Returns the family's error (kResourceExhausted cannot happen with
  // the enumerations' few values).
  Result<Histogram*> ReshardDuration(ReshardDirection direction,
                                     ReshardTransport transport,
                                     ReshardWire wire) const;

  // REQUIRES: the argument is not kCount.
  Histogram* reshard_phase(ReshardPhase phase) const {
    return reshard_phase_[static_cast<size_t>(phase)];
  }
  Counter* reshard_bytes(ReshardBytesKind kind) const {
    return reshard_bytes_[static_cast<size_t>(kind)];
  }
  Histogram* recovery_duration(RecoveryPhase phase) const {
    return recovery_duration_[static_cast<size_t>(phase)];
  }

  Family<Histogram>* reshard_duration_family = nullptr;
  Histogram* checkpoint_save_duration = nullptr;
  Histogram* checkpoint_commit_duration = nullptr;
  Counter* checkpoint_written_bytes = nullptr;
  Counter* checkpoint_logical_bytes = nullptr;
  Gauge* checkpoint_last_committed_step = nullptr;
  Counter* recoveries = nullptr;
  Gauge* ppo_reward_mean = nullptr;
  Gauge* ppo_kl = nullptr;
  Gauge* ppo_policy_loss = nullptr;
  Gauge* ppo_value_loss = nullptr;
  Gauge* ppo_tokens_per_second = nullptr;
  Gauge* build_info = nullptr;

 private:
  std::array<Histogram*, static_cast<size_t>(ReshardPhase::kCount)>
      reshard_phase_{};
  std::array<Counter*, static_cast<size_t>(ReshardBytesKind::kCount)>
      reshard_bytes_{};
  std::array<Histogram*, static_cast<size_t>(RecoveryPhase::kCount)>
      recovery_duration_{};
};

}  // namespace hy::metrics

#endif  // HY_METRICS_HY_METRICS_H_
