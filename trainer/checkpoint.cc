// Checkpointer and CheckpointReader over per-rank statestore stores (see
// hy/trainer/checkpoint.h).

#include "hy/trainer/checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "hy/statestore/group_commit.h"

namespace hy::trainer {

namespace {

using statestore::Store;
using statestore::StoreOptions;
using statestore::VersionInfo;
using Millis = std::chrono::milliseconds;

// Threads per store: several ranks (and readers of several old stores)
// share a node's cores.
constexpr size_t kWriterThreads = 2;
constexpr size_t kReaderThreads = 4;
// How long Open waits, per leftover version, for rank 0's decision.
constexpr int64_t kLeftoverTimeoutMs = 1000;
// A holder contributing more pieces than this to one read (a box shard's
// rows, say) is read whole once, if the pieces are a good part of it,
// rather than decoding its chunks once per piece.
constexpr size_t kMaxPiecesPerRead = 8;

std::string StepName(uint64_t step) { return "step " + std::to_string(step); }

Result<std::unique_ptr<Store>> OpenReadOnly(const std::string& path) {
  StoreOptions o;
  o.read_only = true;
  o.create_if_missing = false;
  o.threads = kReaderThreads;
  return Store::Open(path, o);
}

}  // namespace

std::string RankStorePath(const std::string& root, int rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "rank-%05d", rank);
  return root + "/" + name;
}

struct Checkpointer::Impl {
  CheckpointOptions options;
  std::unique_ptr<Store> store;
  std::vector<statestore::PeerStore> peers;  // Rank 0 only: ranks 1..W-1.
  std::thread worker;                        // The checkpoint in flight.

  mutable std::mutex mu;
  CheckpointStatus status;  // Guarded by mu.

  // Settles versions a dead run left prepared but undecided.
  Status ResolveLeftovers();
  // The background half of a checkpoint: waits for the save, commits, Gcs.
  void Finish(uint64_t step, std::unique_ptr<statestore::SaveHandle> handle,
              const std::string& layout, const std::string& rules);
  Status Commit(uint64_t step, const statestore::SaveStats& stats,
                const std::string& layout, const std::string& rules);
  Status Follow(uint64_t step, int64_t timeout_ms) {
    return statestore::FollowCommit(store.get(), options.rank,
                                    RankStorePath(options.root, 0), step,
                                    Millis(timeout_ms));
  }
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
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  StoreOptions so;
  so.chunk_bytes = options.chunk_bytes;
  so.threads = kWriterThreads;
  so.metrics = options.metrics;
  const std::string path = RankStorePath(options.root, options.rank);
  Result<std::unique_ptr<Store>> store = Store::Open(path, so);
  if (!store.ok()) return store.status().WithContext("checkpoint store");
  impl->store = std::move(store).value();
  if (options.rank == 0) {
    for (int r = 1; r < options.world_size; ++r) {
      impl->peers.push_back({r, RankStorePath(options.root, r)});
    }
  }
  HY_RETURN_IF_ERROR(impl->ResolveLeftovers().WithContext(path));
  Result<uint64_t> latest = impl->store->LatestCommitted();
  if (latest.ok()) {
    impl->status.committed_step = static_cast<int64_t>(*latest);
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
    // (Gc keeps it too) until a later Follow learns it.
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
                          const std::string& layout, const std::string& rules) {
  Wait().IgnoreError();  // Reported through status().
  if (step > statestore::kMaxVersion) {
    return Status::InvalidArgument(StepName(step) + " is too large");
  }
  statestore::SavePart part;
  part.version = step;
  part.rank = impl_->options.rank;
  part.shards = std::move(shards);
  part.blobs = std::move(blobs);
  HY_ASSIGN_OR_RETURN(std::unique_ptr<statestore::SaveHandle> handle,
                      impl_->store->SaveAsync(std::move(part)));
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->status.in_flight_step = static_cast<int64_t>(step);
  }
  Impl* impl = impl_.get();
  impl_->worker =
      std::thread([impl, step, h = std::move(handle), layout, rules]() mutable {
        impl->Finish(step, std::move(h), layout, rules);
      });
  return Status::OK();
}

void Checkpointer::Impl::Finish(uint64_t step,
                                std::unique_ptr<statestore::SaveHandle> handle,
                                const std::string& layout,
                                const std::string& rules) {
  statestore::SaveStats stats;
  Status s = handle->Wait(&stats);
  handle.reset();
  if (!s.ok()) {
    s = s.WithContext("saving " + StepName(step));
    if (options.rank == 0) {
      // Presumed abort, said at once: the followers need not wait for the
      // timeout to learn it. Fails harmlessly if the step is committed.
      store->Abort(step).IgnoreError();
    } else if (s.code() == StatusCode::kAlreadyExists) {
      // A part of this step is here already (a dead run's, not yet
      // settled at Open): learn rank 0's decision so Gc can release it.
      Status earlier = Follow(step, 2 * options.commit_timeout_ms);
      s = Status(s.code(), std::string(s.message()) +
                               " (the earlier part's outcome: " +
                               earlier.ToString() + ")");
    }
  } else if (options.rank == 0) {
    s = Commit(step, stats, layout, rules);
  } else {
    s = Follow(step, 2 * options.commit_timeout_ms);
  }
  if (s.ok()) {
    statestore::GcOptions gc;
    gc.keep_last = static_cast<size_t>(options.keep_last);
    // A failed Gc loses no checkpoint; the next one retries it.
    store->Gc(gc).status().IgnoreError();
  }
  std::lock_guard<std::mutex> lock(mu);
  if (s.ok()) status.committed_step = static_cast<int64_t>(step);
  status.in_flight_step = -1;
  status.last_error = std::move(s);
}

Status Checkpointer::Impl::Commit(uint64_t step,
                                  const statestore::SaveStats& stats,
                                  const std::string& layout,
                                  const std::string& rules) {
  statestore::CommitRecord c;
  c.version = step;
  c.step = step;
  c.world_size = options.world_size;
  c.ranks = {0};
  c.layout = layout;
  c.model_rules = rules;
  c.wall_time_ms = std::chrono::duration_cast<Millis>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  c.logical_bytes = stats.logical_bytes;
  c.stored_bytes = stats.stored_bytes;
  c.new_bytes = stats.new_bytes;
  Status s = statestore::CommitAcrossStores(store.get(), c, peers,
                                            Millis(options.commit_timeout_ms));
  if (!s.ok() && s.code() != StatusCode::kUnavailable &&
      s.code() != StatusCode::kAlreadyExists) {
    // The final Commit failed (Unavailable has aborted already): decide
    // abort so that no follower waits on a version that cannot commit.
    store->Abort(step).IgnoreError();
  }
  return s.WithContext("committing " + StepName(step));
}

CheckpointStatus Checkpointer::status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->status;
}

Status Checkpointer::Wait() {
  if (impl_->worker.joinable()) impl_->worker.join();
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->status.last_error;
}

Result<uint64_t> Checkpointer::LatestCommittedStep(const std::string& root) {
  HY_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                      OpenReadOnly(RankStorePath(root, 0)));
  return store->LatestCommitted();
}

namespace {

// One old rank's shard of a tensor.
struct Holder {
  int rank = 0;
  std::vector<FlatRun> runs;  // In local-buffer order.
  int64_t elements = 0;
};

struct TensorIndex {
  TensorMeta meta;
  std::vector<Holder> holders;  // In rank order.
};

// The parts of `piece` that `covered` (begin -> end, disjoint) lacks.
std::vector<FlatRun> Uncovered(const std::map<int64_t, int64_t>& covered,
                               FlatRun piece) {
  std::vector<FlatRun> out;
  int64_t pos = piece.offset;
  auto it = covered.upper_bound(pos);
  if (it != covered.begin()) --it;
  for (; it != covered.end() && it->first < piece.end(); ++it) {
    if (it->second <= pos) continue;
    if (it->first > pos) out.push_back({pos, it->first - pos});
    pos = std::max(pos, it->second);
  }
  if (pos < piece.end()) out.push_back({pos, piece.end() - pos});
  return out;
}

}  // namespace

struct CheckpointReader::Impl {
  uint64_t step = 0;
  statestore::CommitRecord commit;
  std::vector<std::unique_ptr<Store>> stores;  // Index = old rank.
  std::map<std::string, TensorIndex> tensors;

  // Opens old rank `r`'s store and adds its shards to the index.
  Status AddRank(const std::string& root, int r);
  // Reads `pieces` (global runs of one holder) into `out` (whose first
  // element is global element `base`).
  Status ReadPieces(const std::string& name, const TensorIndex& t,
                    const Holder& h, const std::vector<RunOverlap>& pieces,
                    int64_t base, MutableBytes out);
};

CheckpointReader::CheckpointReader(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
CheckpointReader::~CheckpointReader() = default;

Result<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(
    const std::string& root, int64_t step) {
  const std::string path0 = RankStorePath(root, 0);
  Result<std::unique_ptr<Store>> opened = OpenReadOnly(path0);
  if (!opened.ok()) return opened.status().WithContext("checkpoint");
  auto impl = std::make_unique<Impl>();
  impl->stores.push_back(std::move(opened).value());
  Store* store0 = impl->stores[0].get();
  if (step < 0) {
    HY_ASSIGN_OR_RETURN(impl->step, store0->LatestCommitted());
  } else {
    impl->step = static_cast<uint64_t>(step);
  }
  Result<statestore::Manifest> m0 = store0->ReadManifest(impl->step);
  if (!m0.ok()) {
    if (m0.status().IsNotFound()) {
      return Status::NotFound(StepName(impl->step) +
                              " is not committed under " + root);
    }
    return m0.status();
  }
  impl->commit = m0->commit;
  if (impl->commit.world_size < 1) {
    return Status::DataLoss(path0 + ": commit record of " +
                            StepName(impl->step) + " has world size " +
                            std::to_string(impl->commit.world_size));
  }
  for (int r = 0; r < impl->commit.world_size; ++r) {
    HY_RETURN_IF_ERROR(impl->AddRank(root, r));
  }
  return std::unique_ptr<CheckpointReader>(
      new CheckpointReader(std::move(impl)));
}

Status CheckpointReader::Impl::AddRank(const std::string& root, int r) {
  const std::string path = RankStorePath(root, r);
  const std::string what = StepName(step) + " (committed with " +
                           std::to_string(commit.world_size) +
                           " ranks): rank " + std::to_string(r);
  if (r > 0) {
    Result<std::unique_ptr<Store>> s = OpenReadOnly(path);
    if (!s.ok()) {
      return Status::DataLoss(what + "'s store " + path +
                              " cannot be opened: " + s.status().ToString());
    }
    stores.push_back(std::move(s).value());
  }
  Store* store = stores[r].get();
  Result<statestore::Manifest> m = store->ReadManifest(step);
  if (!m.ok() && m.status().IsNotFound()) {
    HY_ASSIGN_OR_RETURN(std::vector<VersionInfo> versions,
                        store->ListVersions());
    for (const VersionInfo& v : versions) {
      if (v.version == step &&
          std::count(v.prepared.begin(), v.prepared.end(), r) > 0) {
        return Status::DataLoss(
            what + "'s store " + path +
            " holds its part prepared but not rank 0's commit decision (the "
            "rank stopped before copying it); reopening that rank's "
            "Checkpointer copies it");
      }
    }
    return Status::DataLoss(what + "'s store " + path + " lacks the version");
  }
  if (!m.ok()) return m.status().WithContext(path);
  const statestore::CommitRecord& c = m->commit;
  if (c.step != commit.step || c.world_size != commit.world_size ||
      c.layout != commit.layout || c.model_rules != commit.model_rules) {
    return Status::DataLoss(what + "'s store " + path +
                            " holds a different commit of the version");
  }
  for (const auto& [name, entry] : m->tensors) {
    auto [it, fresh] = tensors.emplace(name, TensorIndex{entry.meta, {}});
    if (!fresh && it->second.meta != entry.meta) {
      return Status::DataLoss("tensor '" + name + "' is " +
                              entry.meta.DebugString() + " in rank " +
                              std::to_string(r) + "'s store but " +
                              it->second.meta.DebugString() + " in another");
    }
    for (const statestore::ShardEntry& shard : entry.shards) {
      Holder h;
      h.rank = shard.rank;
      Result<std::vector<FlatRun>> runs =
          shard.geometry.ToFlatRuns(entry.meta.shape);
      if (!runs.ok()) return Status::DataLoss(runs.status().message());
      h.runs = std::move(runs).value();
      h.elements = TotalLength(h.runs);
      if (h.rank != r) {
        return Status::DataLoss(path + " holds a shard of rank " +
                                std::to_string(h.rank) + " for '" + name + "'");
      }
      it->second.holders.push_back(std::move(h));
    }
  }
  return Status::OK();
}

uint64_t CheckpointReader::step() const { return impl_->step; }

const statestore::CommitRecord& CheckpointReader::commit() const {
  return impl_->commit;
}

Result<TensorMeta> CheckpointReader::FindTensor(
    const std::string& tensor) const {
  auto it = impl_->tensors.find(tensor);
  if (it == impl_->tensors.end()) {
    return Status::NotFound("no tensor '" + tensor + "' in " +
                            StepName(impl_->step));
  }
  return it->second.meta;
}

Status CheckpointReader::ReadRegion(const std::string& tensor, FlatRun region,
                                    MutableBytes out) {
  auto it = impl_->tensors.find(tensor);
  if (it == impl_->tensors.end()) {
    return Status::NotFound("no tensor '" + tensor + "' in " +
                            StepName(impl_->step));
  }
  const TensorIndex& t = it->second;
  const uint64_t es = DTypeSize(t.meta.dtype);
  const int64_t numel = *t.meta.NumElements();
  if (region.offset < 0 || region.length < 0 || region.offset > numel ||
      region.length > numel - region.offset) {
    return Status::InvalidArgument("region outside tensor '" + tensor + "'");
  }
  if (out.size() != static_cast<uint64_t>(region.length) * es) {
    return Status::InvalidArgument("output buffer for '" + tensor +
                                   "' has the wrong size");
  }
  // Each element comes from the lowest old rank that holds it.
  std::map<int64_t, int64_t> covered;
  for (const Holder& h : t.holders) {
    std::vector<RunOverlap> pieces;
    for (const RunOverlap& o : IntersectRuns(h.runs, region)) {
      for (const FlatRun& u :
           Uncovered(covered, FlatRun{o.global_offset, o.length})) {
        pieces.push_back({o.local_offset + (u.offset - o.global_offset),
                          u.offset, u.length});
        covered[u.offset] = u.end();
      }
    }
    if (pieces.empty()) continue;
    HY_RETURN_IF_ERROR(
        impl_->ReadPieces(tensor, t, h, pieces, region.offset, out));
  }
  const std::vector<FlatRun> missing = Uncovered(covered, region);
  if (!missing.empty()) {
    return Status::DataLoss(
        "tensor '" + tensor + "' in " + StepName(impl_->step) + ": elements [" +
        std::to_string(missing[0].offset) + ", " +
        std::to_string(missing[0].end()) + ") are held by no old rank");
  }
  return Status::OK();
}

Status CheckpointReader::Impl::ReadPieces(const std::string& name,
                                          const TensorIndex& t, const Holder& h,
                                          const std::vector<RunOverlap>& pieces,
                                          int64_t base, MutableBytes out) {
  Store* store = stores[h.rank].get();
  const uint64_t es = DTypeSize(t.meta.dtype);
  int64_t wanted = 0;
  for (const RunOverlap& p : pieces) wanted += p.length;
  if (pieces.size() > kMaxPiecesPerRead && 4 * wanted >= h.elements) {
    // Many pieces making up much of the shard: decode it whole, once.
    std::string shard(static_cast<size_t>(h.elements) * es, '\0');
    HY_RETURN_IF_ERROR(
        store->ReadShard(step, name, h.rank, MutableBytes(shard)));
    for (const RunOverlap& p : pieces) {
      std::copy_n(shard.data() + p.local_offset * es, p.length * es,
                  out.data() + (p.global_offset - base) * es);
    }
    return Status::OK();
  }
  for (const RunOverlap& p : pieces) {
    HY_RETURN_IF_ERROR(store->ReadRegion(
        step, name, FlatRun{p.global_offset, p.length},
        out.subspan((p.global_offset - base) * es, p.length * es)));
  }
  return Status::OK();
}

Result<std::string> CheckpointReader::ReadBlob(const std::string& name,
                                               int rank) {
  if (rank != statestore::kReplicatedBlob &&
      (rank < 0 || rank >= static_cast<int>(impl_->stores.size()))) {
    return Status::NotFound("no old rank " + std::to_string(rank) + " in " +
                            StepName(impl_->step));
  }
  Store* store = impl_->stores[std::max(rank, 0)].get();
  return store->ReadBlob(impl_->step, name, rank);
}

}  // namespace hy::trainer
