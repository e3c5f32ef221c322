// Store: the commit protocol (Commit, Abort), listing versions, and reading
// manifests (see store.h).

#include <rocksdb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "hy/metrics/hy_metrics.h"
#include "hy/metrics/scoped_timer.h"
#include "store_impl.h"

namespace hy::statestore {

Status RocksStore::Commit(const CommitRecord& commit) {
  if (read_only()) return Status::FailedPrecondition("store is read-only");
  if (commit.world_size < 1) {
    return Status::InvalidArgument("world_size must be >= 1");
  }
  std::shared_lock<std::shared_mutex> gc(gc_mu_);
  std::lock_guard<std::mutex> lock(commit_mu_);
  const metrics::HyMetrics* m = options_.metrics;
  metrics::ScopedTimer timer(m ? m->checkpoint_commit_duration : nullptr);
  if (commit.version > kMaxVersion) {
    return Status::InvalidArgument("version number too large");
  }
  std::string ignored;
  Status s = Get(meta_, keys::Committed(commit.version), &ignored);
  if (s.ok()) {
    return Status::AlreadyExists("version " + std::to_string(commit.version) +
                                 " is already committed");
  }
  if (!s.IsNotFound()) return s;
  s = Get(meta_, keys::Aborted(commit.version), &ignored);
  if (s.ok()) {
    return Status::FailedPrecondition(
        "version " + std::to_string(commit.version) + " was aborted");
  }
  if (!s.IsNotFound()) return s;
  for (int r : commit.ranks) {
    if (r < 0 || r >= commit.world_size) {
      return Status::InvalidArgument("rank " + std::to_string(r) +
                                     " outside the world");
    }
  }
  std::string missing;
  for (int r : commit.LocalRanks()) {
    s = Get(meta_, keys::Prepared(commit.version, r), &ignored);
    if (s.IsNotFound()) {
      missing += (missing.empty() ? "" : ",") + std::to_string(r);
    } else if (!s.ok()) {
      return s;
    }
  }
  if (!missing.empty()) {
    return Status::FailedPrecondition("cannot commit version " +
                                      std::to_string(commit.version) +
                                      ": ranks not prepared: " + missing);
  }
  CommitRecord c = commit;
  c.logical_bytes = c.stored_bytes = c.new_bytes = 0;
  HY_ASSIGN_OR_RETURN(std::vector<RankManifest> parts,
                      ReadRankParts(commit.version));
  HY_RETURN_IF_ERROR(CheckCommittable(commit, parts));
  const std::vector<int> local = commit.LocalRanks();
  for (const RankManifest& p : parts) {
    if (std::find(local.begin(), local.end(), p.rank) == local.end()) continue;
    c.logical_bytes += p.logical_bytes;
    c.stored_bytes += p.stored_bytes;
    c.new_bytes += p.new_bytes;
  }
  c.wall_time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  rocksdb::WriteBatch b;
  b.Put(meta_, keys::Committed(c.version), EncodeCommitRecord(c));
  HY_RETURN_IF_ERROR(WriteSynced(&b, "writing the commit record"));
  if (m != nullptr) {
    m->checkpoint_last_committed_step->Set(static_cast<double>(c.step));
  }
  return Status::OK();
}

Status RocksStore::Abort(uint64_t version) {
  if (read_only()) return Status::FailedPrecondition("store is read-only");
  std::shared_lock<std::shared_mutex> gc(gc_mu_);
  std::lock_guard<std::mutex> lock(commit_mu_);
  std::string ignored;
  Status s = Get(meta_, keys::Committed(version), &ignored);
  if (s.ok()) {
    return Status::FailedPrecondition("version " + std::to_string(version) +
                                      " is committed; it cannot be aborted");
  }
  if (!s.IsNotFound()) return s;
  rocksdb::WriteBatch b;
  b.Put(meta_, keys::Aborted(version), "");
  DeleteVersionParts(&b, version);
  return WriteSynced(&b, "aborting version " + std::to_string(version));
}

Status RocksStore::CheckCommittable(const CommitRecord& commit,
                                    const std::vector<RankManifest>& parts) {
  const std::vector<int> local = commit.LocalRanks();
  Manifest merged;
  std::map<std::string, Hash128> replicated;
  for (const RankManifest& p : parts) {
    if (std::find(local.begin(), local.end(), p.rank) == local.end()) continue;
    Status s = MergeRankManifest(p, &merged);
    if (!s.ok()) return Status::FailedPrecondition(s.message());
    for (const BlobEntry& b : p.blobs) {
      if (b.rank != kReplicatedBlob) continue;
      auto [it, fresh] = replicated.emplace(b.name, b.hash);
      if (!fresh && it->second != b.hash) {
        return Status::FailedPrecondition(
            "ranks saved different bytes for "
            "the replicated blob '" +
            b.name + "'");
      }
    }
  }
  if (!commit.ranks.empty()) return Status::OK();  // Only our own shards.
  // A shared store holds every rank: each element must be held by one.
  for (const auto& [name, t] : merged.tensors) {
    std::vector<FlatRun> runs;
    for (const ShardEntry& s : t.shards) {
      HY_ASSIGN_OR_RETURN(std::vector<FlatRun> r,
                          s.geometry.ToFlatRuns(t.meta.shape));
      runs.insert(runs.end(), r.begin(), r.end());
    }
    std::sort(runs.begin(), runs.end(), [](const FlatRun& a, const FlatRun& b) {
      return a.offset < b.offset;
    });
    int64_t covered = 0;
    for (const FlatRun& r : runs) {
      if (r.offset > covered) break;
      covered = std::max(covered, r.end());
    }
    const int64_t numel = *t.meta.NumElements();
    if (covered < numel) {
      return Status::FailedPrecondition(
          "tensor '" + name + "': elements from " + std::to_string(covered) +
          " on are held by no rank");
    }
  }
  return Status::OK();
}

Result<std::vector<VersionInfo>> RocksStore::ListVersions() {
  std::map<uint64_t, VersionInfo> by_version;
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), meta_));
  for (it->Seek("c"); it->Valid() && it->key().starts_with("c"); it->Next()) {
    if (it->key().size() != 9) return Status::DataLoss("malformed commit key");
    HY_ASSIGN_OR_RETURN(CommitRecord c,
                        DecodeCommitRecord(it->value().ToStringView()));
    VersionInfo& v = by_version[keys::GetBE64(it->key().ToStringView(), 1)];
    v.version = c.version;
    v.committed = true;
    v.commit = c;
  }
  for (it->Seek("x"); it->Valid() && it->key().starts_with("x"); it->Next()) {
    if (it->key().size() != 9) return Status::DataLoss("malformed abort key");
    const uint64_t v = keys::GetBE64(it->key().ToStringView(), 1);
    by_version[v].version = v;
    by_version[v].aborted = true;
  }
  for (it->Seek("p"); it->Valid() && it->key().starts_with("p"); it->Next()) {
    if (it->key().size() != 13)
      return Status::DataLoss("malformed prepare key");
    const std::string_view k = it->key().ToStringView();
    VersionInfo& v = by_version[keys::GetBE64(k, 1)];
    v.version = keys::GetBE64(k, 1);
    v.prepared.push_back(static_cast<int>(keys::GetBE32(k, 9)));
  }
  HY_RETURN_IF_ERROR(FromRocks(it->status(), "listing versions"));
  std::vector<VersionInfo> out;
  for (auto& [version, info] : by_version) out.push_back(std::move(info));
  return out;
}

Result<uint64_t> RocksStore::LatestCommitted() {
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), meta_));
  it->SeekForPrev("c\xff\xff\xff\xff\xff\xff\xff\xff\xff");
  if (it->Valid() && it->key().starts_with("c") && it->key().size() == 9) {
    return keys::GetBE64(it->key().ToStringView(), 1);
  }
  HY_RETURN_IF_ERROR(FromRocks(it->status(), "finding the latest version"));
  return Status::NotFound("no committed version in " + path_);
}

Result<std::vector<RankManifest>> RocksStore::ReadRankParts(uint64_t version) {
  std::vector<RankManifest> parts;
  const std::string prefix = keys::VersionPrefix('m', version);
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), manifests_));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);
       it->Next()) {
    if (it->key().size() != 13)
      return Status::DataLoss("malformed manifest key");
    HY_ASSIGN_OR_RETURN(RankManifest m,
                        DecodeRankManifest(it->value().ToStringView()));
    if (m.version != version ||
        static_cast<uint32_t>(m.rank) !=
            keys::GetBE32(it->key().ToStringView(), 9)) {
      return Status::DataLoss("rank manifest stored under the wrong key");
    }
    parts.push_back(std::move(m));
  }
  HY_RETURN_IF_ERROR(FromRocks(it->status(), "reading rank manifests"));
  return parts;
}

Status RocksStore::AdoptCommit(const CommitRecord& commit) {
  if (commit.world_size < 1) {
    return Status::InvalidArgument("commit record with world size " +
                                   std::to_string(commit.world_size));
  }
  const std::string v = std::to_string(commit.version);
  std::string ignored;
  Status s = Get(meta_, keys::Committed(commit.version), &ignored);
  if (s.ok()) return Status::OK();
  if (!s.IsNotFound()) return s;
  s = Get(meta_, keys::Aborted(commit.version), &ignored);
  if (s.ok()) {
    return Status::FailedPrecondition("version " + v + " was aborted in " +
                                      path_);
  }
  if (!s.IsNotFound()) return s;
  for (int r : commit.LocalRanks()) {
    s = Get(meta_, keys::Prepared(commit.version, static_cast<uint32_t>(r)),
            &ignored);
    if (s.IsNotFound()) {
      return Status::FailedPrecondition("rank " + std::to_string(r) +
                                        " has not prepared version " + v +
                                        " in " + path_);
    }
    HY_RETURN_IF_ERROR(s);
  }
  std::lock_guard<std::mutex> lock(cache_mu_);
  adopted_[commit.version] = commit;
  return Status::OK();
}

Result<Manifest> RocksStore::ReadManifest(uint64_t version) {
  std::shared_lock<std::shared_mutex> gc(gc_mu_);
  HY_ASSIGN_OR_RETURN(std::shared_ptr<const Manifest> m,
                      ReadManifestLocked(version));
  return *m;
}

Result<std::shared_ptr<const Manifest>> RocksStore::ReadManifestLocked(
    uint64_t version) {
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = manifest_cache_.find(version);
    if (it != manifest_cache_.end()) return it->second;
  }
  std::string value;
  Status s = Get(meta_, keys::Committed(version), &value);
  Manifest m;
  if (s.IsNotFound()) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = adopted_.find(version);
    if (it == adopted_.end()) {
      return Status::NotFound("version " + std::to_string(version) +
                              " is not committed in " + path_);
    }
    m.commit = it->second;
  } else {
    HY_RETURN_IF_ERROR(s);
    HY_ASSIGN_OR_RETURN(m.commit, DecodeCommitRecord(value));
  }
  HY_ASSIGN_OR_RETURN(std::vector<RankManifest> parts, ReadRankParts(version));
  std::vector<bool> seen(m.commit.world_size, false);
  const std::vector<int> local = m.commit.LocalRanks();
  for (const RankManifest& p : parts) {
    if (std::find(local.begin(), local.end(), p.rank) == local.end()) continue;
    seen[p.rank] = true;
    HY_RETURN_IF_ERROR(MergeRankManifest(p, &m));
  }
  for (int r : local) {
    if (!seen[r]) {
      return Status::DataLoss("version " + std::to_string(version) +
                              " is committed but rank " + std::to_string(r) +
                              "'s manifest is missing");
    }
  }
  auto shared = std::make_shared<const Manifest>(std::move(m));
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (manifest_cache_.size() >= 8)
    manifest_cache_.erase(manifest_cache_.begin());
  manifest_cache_[version] = shared;
  return shared;
}

Result<const TensorEntry*> RocksStore::FindTensor(const Manifest& m,
                                                  const std::string& name) {
  auto t = m.tensors.find(name);
  if (t == m.tensors.end()) {
    return Status::NotFound("no tensor '" + name + "' in version " +
                            std::to_string(m.commit.version));
  }
  return &t->second;
}

}  // namespace hy::statestore
