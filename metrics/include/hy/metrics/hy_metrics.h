// HyMetrics: the catalogue of every metric hy exports, in one place, so that
// modules, `hyctl metrics`, docs/metrics.md and the Grafana dashboard agree
// on names, types, labels and buckets. The metrics themselves are
// prometheus-cpp's (prometheus::Registry, Counter, Gauge, Histogram); hy adds
// only the catalogue and the glue (exporter.h, pusher.h, scoped_timer.h).
//
// Conventions: names start with "hy_", use base units (seconds, bytes),
// counters end in "_total"; labels take values from the closed sets below
// (plus `peer`, one value per rank of the run), never per-step or per-tensor
// values. The rank, node and run of a series come from the scrape target's
// labels (file_sd, see file_sd.h) or the Pushgateway grouping key, not from
// the metrics.
//
//   auto registry = std::make_shared<hy::metrics::Registry>();
//   HY_ASSIGN_OR_RETURN(auto m, hy::metrics::HyMetrics::Register(*registry));
//   m.reshard_wire_bytes(hy::metrics::ReshardWire::kBf16)->Increment(n);
//   hy::metrics::ScopedTimer t(m.checkpoint_commit_duration);
//
// Ownership: HyMetrics is a cheap bundle of pointers into the Registry it
// was registered on; they are valid for that Registry's lifetime. Copy it
// freely.
//
// Thread-safety: the metrics behind the pointers are prometheus-cpp's (safe
// from any thread); ReshardDuration and PeerHeartbeatAge take their family's
// mutex (cache the result where it is hot).

#ifndef HY_METRICS_HY_METRICS_H_
#define HY_METRICS_HY_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"

namespace hy::metrics {

using Registry = prometheus::Registry;
using Counter = prometheus::Counter;
using Gauge = prometheus::Gauge;
using Histogram = prometheus::Histogram;
using Labels = prometheus::Labels;
using BucketBoundaries = prometheus::Histogram::BucketBoundaries;

// hy's version, the value of hy_build_info's "version" label.
std::string_view HyVersion();

enum class ReshardDirection { kTrainToRollout, kRolloutToTrain, kCount };
enum class ReshardTransport { kLocal, kGloo, kNccl, kCount };
enum class ReshardWire { kRaw, kBf16, kDelta, kCount };
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
// Why a worker was started again (hy_restarts_total) or recovered
// (hy_recoveries_total): a worker process exited or was killed while its
// node stayed (process_exit), or a node and its disk were lost (node_lost).
enum class RestartCause { kProcessExit, kNodeLost, kCount };
// Why a checkpoint failed (hy_checkpoint_failures_total): the disk is full
// or over quota (no_space), another write or read error (io), a rank did
// not answer in time (peer), anything else (other).
enum class CheckpointFailureCause { kNoSpace, kIo, kPeer, kOther, kCount };

// The label value of each enumerator ("train_to_rollout", "gloo", "delta",
// "transfer", "remote", "replicate", "node_lost", ...).
// REQUIRES: the argument is not kCount.
std::string_view LabelValue(ReshardDirection v);
std::string_view LabelValue(ReshardTransport v);
std::string_view LabelValue(ReshardWire v);
std::string_view LabelValue(ReshardPhase v);
std::string_view LabelValue(ReshardBytesKind v);
std::string_view LabelValue(RecoveryPhase v);
std::string_view LabelValue(RestartCause v);
std::string_view LabelValue(CheckpointFailureCause v);

// Returns the cause named `value` ("process_exit", "node_lost"), or
// InvalidArgument.
Result<RestartCause> ParseRestartCause(std::string_view value);

// Bucket bounds, in seconds.
// 1-2-5 steps from 1 ms to 60 s: reshards, reshard phases, commits.
BucketBoundaries ShortDurationBuckets();
// 1-2.5-5 steps from 10 ms to 10 min: checkpoint saves, recovery phases,
// iterations, checkpoint blocking.
BucketBoundaries LongDurationBuckets();

enum class MetricType { kCounter, kGauge, kHistogram };
// "counter", "gauge" or "histogram".
std::string_view MetricTypeName(MetricType type);

// One family of the catalogue.
struct FamilyDef {
  std::string name;
  MetricType type = MetricType::kGauge;
  std::string help;
  std::vector<std::string> label_names;
  BucketBoundaries buckets;  // Histograms only.
};

// Every family HyMetrics::Register registers, in a fixed order.
const std::vector<FamilyDef>& Catalogue();

// The total count and sum of a histogram's observations (prometheus-cpp's
// Histogram exposes them only through Collect()).
uint64_t Count(const Histogram& histogram);
double Sum(const Histogram& histogram);

struct HyMetrics {
  // Registers every family of Catalogue() on `registry` (idempotent:
  // registering twice returns the same metrics), creates the children of
  // closed label sets (phases, byte kinds, wires, causes) at zero, and sets
  // hy_build_info{version} to 1. Returns AlreadyExists if a name is taken
  // by a family of another type, InvalidArgument for any other refusal by
  // prometheus-cpp (its exceptions are converted here).
  static Result<HyMetrics> Register(Registry& registry);

  // hy_reshard_duration_seconds{direction,transport,wire}: created on first
  // use. Returns InvalidArgument if prometheus-cpp refuses the child.
  // REQUIRES: no argument is kCount.
  Result<Histogram*> ReshardDuration(ReshardDirection direction,
                                     ReshardTransport transport,
                                     ReshardWire wire) const;

  // hy_peer_heartbeat_age_seconds{peer="<rank>"}: created on first use.
  // Returns InvalidArgument if prometheus-cpp refuses the child.
  Result<Gauge*> PeerHeartbeatAge(int peer_rank) const;

  // REQUIRES: the argument is not kCount.
  Histogram* reshard_phase(ReshardPhase phase) const {
    return reshard_phase_[static_cast<size_t>(phase)];
  }
  Counter* reshard_bytes(ReshardBytesKind kind) const {
    return reshard_bytes_[static_cast<size_t>(kind)];
  }
  Counter* reshard_wire_bytes(ReshardWire wire) const {
    return reshard_wire_bytes_[static_cast<size_t>(wire)];
  }
  Histogram* recovery_duration(RecoveryPhase phase) const {
    return recovery_duration_[static_cast<size_t>(phase)];
  }
  Counter* recoveries(RestartCause cause) const {
    return recoveries_[static_cast<size_t>(cause)];
  }
  Counter* restarts(RestartCause cause) const {
    return restarts_[static_cast<size_t>(cause)];
  }
  Counter* checkpoint_failures(CheckpointFailureCause cause) const {
    return checkpoint_failures_[static_cast<size_t>(cause)];
  }

  prometheus::Family<Histogram>* reshard_duration_family = nullptr;
  prometheus::Family<Gauge>* peer_heartbeat_age_family = nullptr;
  Counter* reshard_logical_bytes = nullptr;
  Histogram* checkpoint_save_duration = nullptr;
  Histogram* checkpoint_commit_duration = nullptr;
  Histogram* checkpoint_blocking = nullptr;
  Counter* checkpoint_written_bytes = nullptr;
  Counter* checkpoint_logical_bytes = nullptr;
  Gauge* checkpoint_last_committed_step = nullptr;
  Gauge* checkpoint_last_replicated_step = nullptr;
  Gauge* replication_lag_steps = nullptr;
  Counter* damaged_chunks = nullptr;
  Histogram* iteration_duration = nullptr;
  Histogram* weight_sync_duration = nullptr;
  Counter* weight_sync_bytes = nullptr;
  Counter* engine_restarts = nullptr;
  Gauge* weight_version = nullptr;  // -1 before the first sync.
  Gauge* ppo_reward_mean = nullptr;
  Gauge* ppo_kl = nullptr;
  Gauge* ppo_policy_loss = nullptr;
  Gauge* ppo_value_loss = nullptr;
  Gauge* ppo_tokens_per_second = nullptr;
  Gauge* ppo_entropy = nullptr;
  Gauge* ppo_exact_match = nullptr;
  Gauge* ppo_grad_norm = nullptr;
  Gauge* ppo_iteration = nullptr;           // 1-based; 0 before the first.
  Gauge* validation_exact_match = nullptr;  // -1 before the first.
  Gauge* build_info = nullptr;

 private:
  std::array<Histogram*, static_cast<size_t>(ReshardPhase::kCount)>
      reshard_phase_{};
  std::array<Counter*, static_cast<size_t>(ReshardBytesKind::kCount)>
      reshard_bytes_{};
  std::array<Counter*, static_cast<size_t>(ReshardWire::kCount)>
      reshard_wire_bytes_{};
  std::array<Histogram*, static_cast<size_t>(RecoveryPhase::kCount)>
      recovery_duration_{};
  std::array<Counter*, static_cast<size_t>(RestartCause::kCount)>
      recoveries_{};
  std::array<Counter*, static_cast<size_t>(RestartCause::kCount)> restarts_{};
  std::array<Counter*, static_cast<size_t>(CheckpointFailureCause::kCount)>
      checkpoint_failures_{};
};

}  // namespace hy::metrics

#endif  // HY_METRICS_HY_METRICS_H_
