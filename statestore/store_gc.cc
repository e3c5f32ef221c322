// Store: garbage collection (see Store::Gc).
//
// Order of writes, so a crash at any point leaves a consistent store:
//   1. one synced batch drops the records of dropped versions and the index
//      entries of dead chunks, and points repacked chunks at their new epoch
//      (whose data was ingested before);
//   2. only then is the data of dead or repacked epochs deleted.
// A crash between the two leaves epochs that no index entry references;
// the next Gc finds them (live bytes 0) and deletes them.

#include <rocksdb/convenience.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <set>

#include "store_impl.h"

namespace hy::statestore {

struct RocksStore::GcEpoch {
  keys::EpochRecord record;
  uint64_t live_bytes = 0;
  // Chunks still referenced, with where they are.
  std::vector<std::pair<Hash128, keys::ChunkLocation>> live;
};

namespace {

// The committed versions Gc keeps: the newest keep_last of those
// options.counted accepts, the others unless the caller dropped them, and
// the pinned ones.
std::set<uint64_t> KeptVersions(const std::vector<VersionInfo>& versions,
                                const GcOptions& options) {
  std::vector<uint64_t> committed, counted;
  std::set<uint64_t> keep;
  for (const VersionInfo& v : versions) {
    if (!v.committed) continue;
    committed.push_back(v.version);
    if (!options.counted || options.counted(v.version)) {
      counted.push_back(v.version);
    } else if (!(options.drop && options.drop(v.version))) {
      keep.insert(v.version);
    }
  }
  for (size_t i = counted.size() > options.keep_last
                      ? counted.size() - options.keep_last
                      : 0;
       i < counted.size(); ++i) {
    if (!(options.drop && options.drop(counted[i]))) keep.insert(counted[i]);
  }
  for (uint64_t p : options.pinned) {
    if (std::binary_search(committed.begin(), committed.end(), p))
      keep.insert(p);
  }
  return keep;
}

}  // namespace

void RocksStore::DeleteVersionParts(rocksdb::WriteBatch* b, uint64_t v) {
  b->DeleteRange(meta_, keys::VersionPrefix('p', v),
                 keys::VersionPrefix('p', v + 1));
  for (char tag : {'m', 'b'}) {
    b->DeleteRange(manifests_, keys::VersionPrefix(tag, v),
                   keys::VersionPrefix(tag, v + 1));
  }
}

Status RocksStore::DeleteEpochData(uint64_t epoch) {
  const std::string begin = keys::EpochBegin(epoch);
  const std::string end = keys::EpochBegin(epoch + 1);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  HY_RETURN_IF_ERROR(FromRocks(db_->DeleteRange(wo, chunks_, begin, end),
                               "deleting epoch " + std::to_string(epoch)));
  const rocksdb::Slice b(begin), e(end);
  HY_RETURN_IF_ERROR(FromRocks(
      rocksdb::DeleteFilesInRange(db_, chunks_, &b, &e, /*include_end=*/false),
      "dropping the files of epoch " + std::to_string(epoch)));
  rocksdb::WriteBatch batch;
  batch.Delete(meta_, keys::Epoch(epoch));
  return WriteSynced(&batch, "dropping an epoch record");
}

std::vector<uint64_t> RocksStore::GcDropVersions(
    const std::vector<VersionInfo>& versions, const std::set<uint64_t>& keep,
    const GcOptions& options, rocksdb::WriteBatch* batch, GcReport* report) {
  const uint64_t newest_kept = keep.empty() ? 0 : *keep.rbegin();
  const uint64_t oldest_kept = keep.empty() ? 0 : *keep.begin();
  // A store shared by all ranks holds every commit decision itself; a
  // per-rank store (group commit) does not.
  bool shared = true;
  for (const VersionInfo& v : versions) {
    if (v.committed) shared = v.commit.ranks.empty();
  }
  std::vector<uint64_t> survivors;  // Versions whose chunks stay live.
  for (const VersionInfo& v : versions) {
    bool dropped;
    if (v.committed) {
      dropped = keep.count(v.version) == 0;
    } else {
      dropped = v.aborted || (options.drop && options.drop(v.version)) ||
                (shared && !keep.empty() && v.version < newest_kept);
    }
    if (dropped) {
      DeleteVersionParts(batch, v.version);
      if (v.committed) batch->Delete(meta_, keys::Committed(v.version));
      if (!v.prepared.empty() || v.committed) {
        (v.committed ? report->dropped_versions : report->dropped_uncommitted)
            .push_back(v.version);
      }
    } else {
      survivors.push_back(v.version);
    }
    // Abort records outlive their parts while a follower may still ask.
    if (v.aborted && !keep.empty() && v.version < oldest_kept) {
      batch->Delete(meta_, keys::Aborted(v.version));
    }
  }
  return survivors;
}

Result<std::set<Hash128>> RocksStore::GcMarkLive(
    const std::vector<uint64_t>& survivors,
    const std::map<Hash128, keys::ChunkLocation>& index) {
  std::set<Hash128> live;
  for (uint64_t v : survivors) {
    HY_ASSIGN_OR_RETURN(std::vector<RankManifest> parts, ReadRankParts(v));
    for (const RankManifest& p : parts) {
      for (const TensorEntry& t : p.tensors) {
        for (const ShardEntry& s : t.shards) {
          for (const ChunkRef& c : s.chunks) live.insert(c.address);
        }
      }
    }
  }
  // A live delta chunk keeps its whole base chain alive.
  std::vector<Hash128> stack(live.begin(), live.end());
  while (!stack.empty()) {
    const Hash128 a = stack.back();
    stack.pop_back();
    auto entry = index.find(a);
    if (entry != index.end() && entry->second.depth > 0 &&
        live.insert(entry->second.base).second) {
      stack.push_back(entry->second.base);
    }
  }
  return live;
}

Status RocksStore::GcReadIndex(std::map<uint64_t, GcEpoch>* epochs,
                               std::map<Hash128, keys::ChunkLocation>* index) {
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), meta_));
  for (it->Seek("e"); it->Valid() && it->key().starts_with("e"); it->Next()) {
    GcEpoch u;
    if (it->key().size() != 9 ||
        !keys::DecodeEpoch(it->value().ToStringView(), &u.record)) {
      return Status::DataLoss("corrupt epoch record");
    }
    (*epochs)[keys::GetBE64(it->key().ToStringView(), 1)] = u;
  }
  for (it->Seek("a"); it->Valid() && it->key().starts_with("a"); it->Next()) {
    keys::ChunkLocation loc;
    if (it->key().size() != 17 ||
        !keys::DecodeLocation(it->value().ToStringView(), &loc)) {
      return Status::DataLoss("corrupt chunk index entry");
    }
    (*index)[keys::GetHash(it->key().ToStringView(), 1)] = loc;
  }
  return FromRocks(it->status(), "scanning the chunk index");
}

Result<bool> RocksStore::GcRepack(uint64_t epoch, const GcEpoch& u,
                                  rocksdb::WriteBatch* batch,
                                  GcReport* report) {
  // Each live chunk is checked by its own checksums (not RocksDB's block
  // checksum, which a damaged neighbour in the same block would fail). A
  // damaged one is quarantined and its epoch left as it is: moving it
  // would copy the damage, and the next save that needs it writes it.
  std::vector<EncodedChunk> moved;
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  ro.verify_checksums = false;
  for (const auto& [a, loc] : u.live) {
    std::string value;
    HY_RETURN_IF_ERROR(
        FromRocks(db_->Get(ro, chunks_, keys::Chunk(epoch, a), &value),
                  "repacking chunk " + a.ToHex()));
    if (Result<ChunkHeader> h = VerifyChunk(value); !h.ok()) {
      Quarantine(a, h.status().WithContext("chunk " + a.ToHex()));
      return false;
    }
    moved.push_back({a, std::move(value), loc.depth, loc.base, loc.encoding});
  }
  uint64_t fresh = 0;
  HY_RETURN_IF_ERROR(WriteEpoch(&moved, &fresh));
  keys::EpochRecord r;
  r.chunks = moved.size();
  for (const EncodedChunk& c : moved) {
    r.bytes += c.value.size();
    batch->Put(meta_, keys::ChunkIndex(c.address),
               keys::EncodeLocation(
                   {fresh, c.value.size(), c.depth, c.base, c.encoding}));
  }
  r.sealed = true;
  batch->Put(meta_, keys::Epoch(fresh), keys::EncodeEpoch(r));
  report->repacked_bytes += r.bytes;
  report->reclaimed_bytes += u.record.bytes - u.live_bytes;
  return true;
}

Result<GcReport> RocksStore::Gc(const GcOptions& options) {
  if (read_only()) return Status::FailedPrecondition("store is read-only");
  std::unique_lock<std::shared_mutex> gc(gc_mu_);
  GcReport report;
  HY_ASSIGN_OR_RETURN(std::vector<VersionInfo> versions, ListVersions());
  rocksdb::WriteBatch batch;
  const std::vector<uint64_t> survivors = GcDropVersions(
      versions, KeptVersions(versions, options), options, &batch, &report);
  std::map<uint64_t, GcEpoch> epochs;
  std::map<Hash128, keys::ChunkLocation> index;
  HY_RETURN_IF_ERROR(GcReadIndex(&epochs, &index));
  HY_ASSIGN_OR_RETURN(std::set<Hash128> live, GcMarkLive(survivors, index));
  // Sweep the index, and tally what stays live in each epoch.
  for (const auto& [a, loc] : index) {
    if (live.count(a)) {
      GcEpoch& u = epochs[loc.epoch];
      u.live_bytes += loc.stored_length;
      u.live.push_back({a, loc});
    } else {
      batch.Delete(meta_, keys::ChunkIndex(a));
      ++report.dropped_chunks;
      report.reclaimed_bytes += loc.stored_length;
    }
  }
  // Epochs to delete outright, and sparse ones to repack first.
  std::vector<uint64_t> doomed;
  for (auto& [epoch, u] : epochs) {
    if (u.live.empty()) {
      doomed.push_back(epoch);
      continue;
    }
    if (!u.record.sealed || u.record.bytes == 0 ||
        static_cast<double>(u.live_bytes) >=
            options.repack_below * static_cast<double>(u.record.bytes)) {
      continue;
    }
    HY_ASSIGN_OR_RETURN(bool repacked, GcRepack(epoch, u, &batch, &report));
    if (repacked) doomed.push_back(epoch);
  }
  HY_RETURN_IF_ERROR(WriteSynced(&batch, "garbage collection"));
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    manifest_cache_.clear();
  }
  for (uint64_t epoch : doomed) HY_RETURN_IF_ERROR(DeleteEpochData(epoch));
  return report;
}

}  // namespace hy::statestore
