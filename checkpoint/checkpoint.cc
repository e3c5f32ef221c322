// Checkpointer over per-node statestore stores (see
// hy/checkpoint/checkpoint.h).

#include "hy/checkpoint/checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "checkpoint_internal.h"
#include "hy/metrics/hy_metrics.h"
#include "hy/recovery/catalog.h"
#include "hy/recovery/node_layout.h"
#include "hy/recovery/replicator.h"
#include "hy/recovery/retention.h"
#include "hy/recovery/transport_commit.h"
#include "hy/statestore/group_commit.h"

namespace hy::checkpoint {

namespace internal {

Result<std::unique_ptr<statestore::Store>> OpenReadOnly(
    const std::string& path) {
  statestore::StoreOptions o;
  o.read_only = true;
  o.create_if_missing = false;
  o.threads = kReaderThreads;
  return statestore::Store::Open(path, o);
}

}  // namespace internal

namespace {

using internal::kWriterThreads;
using internal::OpenReadOnly;
using internal::StepName;
using statestore::Store;
using statestore::StoreOptions;
using statestore::VersionInfo;
using Millis = std::chrono::milliseconds;

// How long Open waits, per leftover version, for rank 0's decision.
constexpr int64_t kLeftoverTimeoutMs = 1000;

}  // namespace

metrics::CheckpointFailureCause FailureCause(const Status& error) {
  using C = metrics::CheckpointFailureCause;
  const std::string text = error.ToString();
  auto has = [&text](const char* s) {
    return text.find(s) != std::string::npos;
  };
  // strerror(ENOSPC) and (EDQUOT), which RocksDB's messages quote too.
  if (has("No space left on device") || has("Disk quota exceeded")) {
    return C::kNoSpace;
  }
  if (error.code() == StatusCode::kIOError || has("IOError") || has("IO error")) return C::kIo;
  if (error.code() == StatusCode::kUnavailable ||
      error.code() == StatusCode::kDeadlineExceeded) {
    return C::kPeer;
  }
  return C::kOther;
}

std::string RankStorePath(const std::string& root, int rank,
                          const std::vector<int>& nodes) {
  if (nodes.empty()) return recovery::PrimaryStorePath(root, rank);
  return recovery::PrimaryStorePath(root, nodes[rank],
                                    recovery::SlotOf(rank, nodes));
}

struct Checkpointer::Impl {
  CheckpointOptions options;
  std::unique_ptr<Store> store;
  std::vector<statestore::PeerStore> peers;  // Rank 0 only: ranks 1..W-1.
  std::thread worker;                        // The checkpoint in flight.
  // Its save while it may still read the caller's shards (read_in_place;
  // the caller's thread only). Shared with `worker`.
  std::shared_ptr<statestore::SaveHandle> reading;
  // When the checkpoint in flight was started (written before its thread).
  std::chrono::steady_clock::time_point save_start;
  std::unique_ptr<recovery::Replicator> replicator;  // May be null.

  mutable std::mutex mu;
  CheckpointStatus status;  // Guarded by mu.

  // Settles versions a dead run left prepared but undecided.
  Status ResolveLeftovers();
  // Retention after `version` committed (and, when `replicated`, every
  // copy of it is durable): hy/recovery/retention.h.
  void Retain(uint64_t version, bool replicated);
  // The background half of a checkpoint: waits for the save, commits, Gcs.
  void Finish(uint64_t step, std::shared_ptr<statestore::SaveHandle> handle,
              const std::string& layout, const std::string& rules,
              const std::function<void()>& after_read);
  Status Commit(uint64_t step, const statestore::SaveStats& stats,
                const std::string& layout, const std::string& rules);
  // The commit record of `step` (rank 0's; byte counts left zero).
  statestore::CommitRecord Record(uint64_t step, const std::string& layout,
                                  const std::string& rules) const {
    statestore::CommitRecord c;
    c.version = Version(step);
    c.step = step;
    c.world_size = options.world_size;
    c.ranks = {0};
    c.layout = layout;
    c.model_rules = rules;
    c.wall_time_ms = std::chrono::duration_cast<Millis>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    return c;
  }
  Status Follow(uint64_t version, int64_t timeout_ms) {
    return statestore::FollowCommit(
        store.get(), options.rank,
        RankStorePath(options.root, 0, options.nodes), version,
        Millis(timeout_ms));
  }
  uint64_t Version(uint64_t step) const {
    return recovery::MakeVersion(step, options.generation);
  }
  // Sets this rank's hy_checkpoint_last_committed_step,
  // hy_checkpoint_last_replicated_step and hy_replication_lag_steps for a
  // finished checkpoint (-1: not committed / not replicated).
  void RecordReplication(int64_t committed, int64_t replicated) {
    const metrics::HyMetrics* m = options.metrics;
    if (m == nullptr) return;
    if (committed >= 0) last_committed = committed;
    if (replicated >= 0) last_replicated = replicated;
    if (last_committed < 0) return;
    m->checkpoint_last_committed_step->Set(static_cast<double>(last_committed));
    m->checkpoint_last_replicated_step->Set(
        static_cast<double>(last_replicated));
    m->replication_lag_steps->Set(static_cast<double>(
        last_committed - std::max<int64_t>(last_replicated, 0)));
  }
  int64_t last_committed = -1;  // Only the checkpoint thread uses these.
  int64_t last_replicated = -1;
};

Checkpointer::Checkpointer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

Checkpointer::~Checkpointer() { Wait().IgnoreError(); }

Result<std::unique_ptr<Checkpointer>> Checkpointer::Open(
    const CheckpointOptions& options) {
  if (options.root.empty()) {
    return Status::InvalidArgument("checkpoint root is empty");
  }
  if (options.world_size < 1 || options.rank < 0 ||
      options.rank >= options.world_size) {
    return Status::InvalidArgument("rank " + std::to_string(options.rank) +
                                   " outside a world of " +
                                   std::to_string(options.world_size));
  }
  if (options.keep_last < 1 || options.commit_timeout_ms <= 0) {
    return Status::InvalidArgument("need keep_last >= 1, commit_timeout > 0");
  }
  if (!options.nodes.empty() &&
      static_cast<int>(options.nodes.size()) != options.world_size) {
    return Status::InvalidArgument("node ids do not match the world size");
  }
  if (options.generation > recovery::kMaxGeneration) {
    return Status::InvalidArgument("generation out of range");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  StoreOptions so;
  so.chunk_bytes = options.chunk_bytes;
  if (options.staging_bytes > 0) {
    so.staging_bytes = options.staging_bytes;
    // Encoded batches in flight stay within the same bound.
    so.ingest_batch_bytes =
        std::min(so.ingest_batch_bytes, options.staging_bytes);
  }
  so.threads = kWriterThreads;
  so.metrics = options.metrics;
  so.run_id = options.run_id;
  if (options.log_damage) {
    so.on_damaged_chunk = [log = options.log_damage](const std::string& path,
                                                     const Hash128& address,
                                                     const Status& why) {
      log("store " + path + ": chunk " + address.ToHex() + " is damaged (" +
          why.ToString() +
          "); quarantined: the next save that needs it writes it again");
    };
  }
  const std::string path =
      RankStorePath(options.root, options.rank, options.nodes);
  Result<std::unique_ptr<Store>> store = Store::Open(path, so);
  if (!store.ok()) return store.status().WithContext("checkpoint store");
  impl->store = std::move(store).value();
  if (options.rank == 0 && options.transport == nullptr) {
    for (int r = 1; r < options.world_size; ++r) {
      impl->peers.push_back({r, RankStorePath(options.root, r, options.nodes)});
    }
  }
  if (options.replicas > 0 && options.transport != nullptr) {
    recovery::ReplicatorOptions ro;
    ro.root = options.root;
    ro.nodes = options.nodes;
    if (ro.nodes.empty()) {
      for (int r = 0; r < options.world_size; ++r) ro.nodes.push_back(r);
    }
    ro.replicas = options.replicas;
    ro.keep_last = options.keep_last;
    ro.run_id = options.run_id;
    ro.on_damaged_chunk = so.on_damaged_chunk;
    ro.metrics = options.metrics;
    // Replication streams within the same memory bound as staging.
    if (options.staging_bytes > 0) ro.piece_bytes = options.staging_bytes;
    impl->replicator = std::make_unique<recovery::Replicator>(options.transport,
                                                              std::move(ro));
  }
  HY_RETURN_IF_ERROR(impl->ResolveLeftovers().WithContext(path));
  Result<uint64_t> latest = impl->store->LatestCommitted();
  if (latest.ok()) {
    impl->status.committed_step =
        static_cast<int64_t>(recovery::VersionStep(*latest));
  } else if (!latest.status().IsNotFound()) {
    return latest.status();
  }
  return std::unique_ptr<Checkpointer>(new Checkpointer(std::move(impl)));
}

Status Checkpointer::Impl::ResolveLeftovers() {
  HY_ASSIGN_OR_RETURN(std::vector<VersionInfo> versions, store->ListVersions());
  const int64_t timeout_ms =
      std::min(kLeftoverTimeoutMs, options.commit_timeout_ms);
  for (const VersionInfo& v : versions) {
    if (v.committed || v.aborted || v.prepared.empty()) continue;
    if (options.rank == 0) {
      // The coordinator's store decides: nothing undecided here can still
      // commit, so give it up, which also tells the followers.
      HY_RETURN_IF_ERROR(store->Abort(v.version));
      continue;
    }
    // A follower copies the decision; if there is none yet, the part stays
    // (Gc keeps it too) until a later Follow learns it. Over a transport
    // there is no store to read it from: recovery settles it from the
    // catalog of every store (hy/recovery/recovery.h), before this runs.
    if (options.transport != nullptr) continue;
    Status s = Follow(v.version, timeout_ms);
    if (!s.ok() && s.code() != StatusCode::kAborted &&
        s.code() != StatusCode::kUnavailable) {
      return s.WithContext("settling leftover " + StepName(v.version));
    }
  }
  return Status::OK();
}

Status Checkpointer::Save(uint64_t step,
                          std::vector<statestore::ShardData> shards,
                          std::vector<statestore::BlobData> blobs,
                          const std::string& layout, const std::string& rules,
                          std::function<void()> after_read) {
  Wait().IgnoreError();  // Reported through status().
  if (step > statestore::kMaxVersion) {
    return Status::InvalidArgument(StepName(step) + " is too large");
  }
  statestore::SavePart part;
  part.version = impl_->Version(step);
  part.rank = impl_->options.rank;
  part.shards = std::move(shards);
  part.blobs = std::move(blobs);
  std::shared_ptr<statestore::SaveHandle> handle;
  if (impl_->options.read_in_place) {
    HY_ASSIGN_OR_RETURN(handle, impl_->store->SaveBorrowed(std::move(part)));
    impl_->reading = handle;
  } else {
    HY_ASSIGN_OR_RETURN(handle, impl_->store->SaveAsync(std::move(part)));
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->status.in_flight_step = static_cast<int64_t>(step);
  }
  Impl* impl = impl_.get();
  impl_->save_start = std::chrono::steady_clock::now();
  impl_->worker = std::thread([impl, step, h = std::move(handle), layout, rules,
                               after_read = std::move(after_read)]() mutable {
    impl->Finish(step, std::move(h), layout, rules, after_read);
  });
  return Status::OK();
}

void Checkpointer::Impl::Finish(uint64_t step,
                                std::shared_ptr<statestore::SaveHandle> handle,
                                const std::string& layout,
                                const std::string& rules,
                                const std::function<void()>& after_read) {
  const uint64_t version = Version(step);
  statestore::SaveStats stats;
  Status s = handle->Wait(&stats);
  handle.reset();
  if (after_read) after_read();
  if (options.transport != nullptr) {
    s = recovery::CommitOverTransport(options.transport, store.get(),
                                      Record(step, layout, rules), s, stats)
            .WithContext("committing " + StepName(step));
  } else if (!s.ok()) {
    s = s.WithContext("saving " + StepName(step));
    if (options.rank == 0) {
      // Presumed abort, said at once: the followers need not wait for the
      // timeout to learn it. Fails harmlessly if the step is committed.
      store->Abort(version).IgnoreError();
    } else if (s.code() == StatusCode::kAlreadyExists) {
      // A part of this step is here already (a dead run's, not yet
      // settled at Open): learn rank 0's decision so Gc can release it.
      Status earlier = Follow(version, 2 * options.commit_timeout_ms);
      s = Status(s.code(), std::string(s.message()) +
                               " (the earlier part's outcome: " +
                               earlier.ToString() + ")");
    }
  } else if (options.rank == 0) {
    s = Commit(step, stats, layout, rules);
  } else {
    s = Follow(version, 2 * options.commit_timeout_ms);
  }
  const bool committed = s.ok();
  bool replicated = committed;  // Nothing to replicate without replicas.
  if (replicator != nullptr) {
    // Every rank takes part, committed or not, so that none waits.
    Status r = replicator->Replicate(store.get(), version, s.ok(), nullptr);
    if (s.ok() && !r.ok()) s = r.WithContext("replicating " + StepName(step));
    replicated = committed && r.ok();
  }
  RecordReplication(committed ? static_cast<int64_t>(step) : -1,
                    replicated ? static_cast<int64_t>(step) : -1);
  if (s.ok()) Retain(version, replicated);
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - save_start)
                             .count();
  if (!s.ok() && options.metrics != nullptr) {
    options.metrics->checkpoint_failures(FailureCause(s))->Increment();
  }
  std::lock_guard<std::mutex> lock(mu);
  if (s.ok()) {
    status.committed_step = static_cast<int64_t>(step);
    status.last_durable_seconds = seconds;
    status.consecutive_failures = 0;
  } else {
    ++status.failures;
    ++status.consecutive_failures;
    status.failed_step = static_cast<int64_t>(step);
  }
  status.in_flight_step = -1;
  status.last_error = std::move(s);
}

void Checkpointer::Impl::Retain(uint64_t version, bool replicated) {
  recovery::RetentionPolicy policy;
  policy.live_generation = options.generation;
  policy.keep_last = static_cast<size_t>(options.keep_last);
  if (replicated && !options.keep_superseded) policy.safe_version = version;
  // A failed Gc loses no checkpoint; the next commit retries it.
  store->Gc(recovery::GcOptionsFor(policy)).status().IgnoreError();
  if (replicator != nullptr) replicator->Retain(policy).IgnoreError();
  if (policy.safe_version == 0 || options.transport == nullptr) return;
  // Stores no rank of this world writes, left by earlier generations: on
  // this node (its first rank sweeps them) and, by rank 0, on nodes the
  // run no longer uses.
  std::vector<int> nodes = options.nodes;
  if (nodes.empty()) {
    for (int r = 0; r < options.world_size; ++r) nodes.push_back(r);
  }
  const int replicas = replicator != nullptr ? options.replicas : 0;
  if (recovery::SlotOf(options.rank, nodes) == 0) {
    Result<std::vector<recovery::StoreLocation>> stale =
        recovery::StaleNodeStores(options.root, nodes[options.rank], nodes,
                                  replicas);
    if (stale.ok()) {
      recovery::ApplyRetention(*stale, policy, options.run_id, nullptr)
          .IgnoreError();
    }
  }
  if (options.rank != 0) return;
  Result<std::vector<int>> present = recovery::ListNodes(options.root);
  if (!present.ok()) return;
  for (int n : *present) {
    if (std::count(nodes.begin(), nodes.end(), n) > 0) continue;
    Result<std::vector<recovery::StoreLocation>> gone =
        recovery::ListNodeStores(options.root, n);
    if (gone.ok()) {
      recovery::ApplyRetention(*gone, policy, options.run_id, nullptr)
          .IgnoreError();
    }
  }
  recovery::RemoveEmptyNodes(options.root, nodes).status().IgnoreError();
}

Status Checkpointer::Impl::Commit(uint64_t step,
                                  const statestore::SaveStats& stats,
                                  const std::string& layout,
                                  const std::string& rules) {
  statestore::CommitRecord c = Record(step, layout, rules);
  c.logical_bytes = stats.logical_bytes;
  c.stored_bytes = stats.stored_bytes;
  c.new_bytes = stats.new_bytes;
  Status s = statestore::CommitAcrossStores(store.get(), c, peers,
                                            Millis(options.commit_timeout_ms));
  if (!s.ok() && s.code() != StatusCode::kUnavailable &&
      s.code() != StatusCode::kAlreadyExists) {
    // The final Commit failed (Unavailable has aborted already): decide
    // abort so that no follower waits on a version that cannot commit.
    store->Abort(c.version).IgnoreError();
  }
  return s.WithContext("committing " + StepName(step));
}

CheckpointStatus Checkpointer::status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->status;
}

void Checkpointer::WaitRead() {
  if (impl_->reading != nullptr) impl_->reading->WaitRead();
  impl_->reading.reset();
}

Status Checkpointer::Wait() {
  if (impl_->worker.joinable()) impl_->worker.join();
  impl_->reading.reset();
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->status.last_error;
}

Result<uint64_t> Checkpointer::LatestCommittedStep(const std::string& root) {
  std::vector<int> nodes;
  HY_ASSIGN_OR_RETURN(recovery::Catalog catalog,
                      recovery::Catalog::ScanRoot(root, &nodes));
  int64_t latest = -1;
  for (const recovery::CopyEntry& e : catalog.entries()) {
    if (e.state == recovery::CopyState::kCommitted) {
      latest = std::max(latest, static_cast<int64_t>(e.commit.step));
    }
  }
  if (latest < 0) return Status::NotFound("nothing committed under " + root);
  return static_cast<uint64_t>(latest);
}

}  // namespace hy::checkpoint
