// Store: the save path (Save; the chunk pipeline is PartBuilder) and chunk
// ingestion.

#include <rocksdb/sst_file_writer.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <map>
#include <set>

#include "hy/metrics/hy_metrics.h"
#include "hy/metrics/scoped_timer.h"
#include "part_builder.h"
#include "store_impl.h"

namespace hy::statestore {

namespace fs = std::filesystem;

Status CheckShard(const TensorMeta& meta, const ShardGeometry& geometry,
                  std::set<std::string>* names) {
  HY_RETURN_IF_ERROR(meta.Validate());
  if (!names->insert(meta.name).second) {
    return Status::InvalidArgument("tensor '" + meta.name +
                                   "' appears twice in one save");
  }
  return geometry.Validate(meta.shape)
      .WithContext("tensor '" + meta.name + "'");
}

Status CheckSavePart(const SavePart& part) {
  if (part.rank < 0) return Status::InvalidArgument("rank must be >= 0");
  if (part.version > kMaxVersion) {
    return Status::InvalidArgument("version number too large");
  }
  std::set<std::string> names;
  for (const ShardData& s : part.shards) {
    HY_RETURN_IF_ERROR(CheckShard(s.meta, s.geometry, &names));
    const uint64_t want = static_cast<uint64_t>(s.geometry.NumElements()) *
                          DTypeSize(s.meta.dtype);
    if (s.data.size() != want) {
      return Status::InvalidArgument("tensor '" + s.meta.name + "': shard " +
                                     s.geometry.ToString() + " needs " +
                                     std::to_string(want) + " bytes, got " +
                                     std::to_string(s.data.size()));
    }
  }
  std::set<std::pair<int, std::string>> blobs;
  for (const BlobData& b : part.blobs) {
    if (b.name.empty()) return Status::InvalidArgument("blob without a name");
    if (b.rank != kReplicatedBlob && b.rank != part.rank) {
      return Status::InvalidArgument("blob '" + b.name +
                                     "' belongs to another rank");
    }
    if (!blobs.insert({b.rank, b.name}).second) {
      return Status::InvalidArgument("blob '" + b.name + "' appears twice");
    }
  }
  return Status::OK();
}

Status CheckHostShards(const SavePart& part, size_t n) {
  for (size_t i = 0; i < n && i < part.shards.size(); ++i) {
    if (part.shards[i].on_gpu) {
      return Status::InvalidArgument(
          "tensor '" + part.shards[i].meta.name +
          "' is in CUDA memory: SaveAsync copies it to the host; Save and "
          "SaveBorrowed read on the host, in place");
    }
  }
  return Status::OK();
}

Status RocksStore::Save(const SavePart& part, SaveStats* stats) {
  return SaveBorrowing(part, stats, 0, nullptr);
}

Status RocksStore::SaveBorrowing(const SavePart& part, SaveStats* stats,
                                 size_t borrowed,
                                 const std::function<void()>& release) {
  // Whatever happens, the caller's buffers are free when this returns.
  struct Releaser {
    const std::function<void()>& fn;
    bool done = false;
    void operator()() {
      if (!done && fn) fn();
      done = true;
    }
    ~Releaser() { (*this)(); }
  } releaser{release};
  if (read_only()) return Status::FailedPrecondition("store is read-only");
  HY_RETURN_IF_ERROR(CheckSavePart(part));
  HY_RETURN_IF_ERROR(CheckHostShards(part, part.shards.size()));
  std::shared_lock<std::shared_mutex> gc(gc_mu_);
  const metrics::HyMetrics* m = options_.metrics;
  metrics::ScopedTimer timer(m ? m->checkpoint_save_duration : nullptr);
  return SaveLocked(part, stats, borrowed, [&] { releaser(); });
}

Status RocksStore::SaveLocked(const SavePart& part, SaveStats* stats,
                              size_t borrowed,
                              const std::function<void()>& release) {
  PartBuilder builder(this, part.version, part.rank);
  HY_RETURN_IF_ERROR(builder.Start());
  const uint64_t cb = options_.chunk_bytes;
  std::vector<PendingChunk> chunks;
  for (size_t i = 0; i < part.shards.size(); ++i) {
    const ShardData& s = part.shards[i];
    HY_RETURN_IF_ERROR(builder.BeginShard(s.meta, s.geometry, s.cast_to_bf16,
                                          s.after_chunk_read));
    for (uint64_t off = 0; off < s.data.size(); off += cb) {
      chunks.push_back({i,
                        off / cb,
                        s.data.subspan(off, std::min(cb, s.data.size() - off)),
                        {}});
    }
  }
  HY_RETURN_IF_ERROR(builder.AddChunks(&chunks, borrowed, release));
  return builder.Finish(part.blobs, stats);
}

Result<std::map<std::string, ShardEntry>> RocksStore::PreviousShards(
    uint64_t version, int rank) {
  std::map<std::string, ShardEntry> out;
  if (version == 0) return out;
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions(), meta_));
  it->SeekForPrev(keys::Committed(version - 1));
  if (!it->Valid() || !it->key().starts_with("c") || it->key().size() != 9) {
    return out;
  }
  const uint64_t prev = keys::GetBE64(it->key().ToStringView(), 1);
  std::string value;
  Status s = Get(manifests_, keys::RankPart(prev, rank), &value);
  if (s.IsNotFound()) return out;
  HY_RETURN_IF_ERROR(s);
  HY_ASSIGN_OR_RETURN(RankManifest m, DecodeRankManifest(value));
  for (TensorEntry& t : m.tensors) {
    for (ShardEntry& e : t.shards) {
      if (e.rank == rank) out[t.meta.name] = std::move(e);
    }
  }
  return out;
}

Status RocksStore::WriteEpoch(std::vector<EncodedChunk>* chunks,
                              uint64_t* epoch) {
  std::sort(chunks->begin(), chunks->end(),
            [](const EncodedChunk& a, const EncodedChunk& b) {
              return a.address < b.address;
            });
  {
    std::lock_guard<std::mutex> lock(epoch_mu_);
    *epoch = next_epoch_++;
  }
  keys::EpochRecord record;
  record.chunks = chunks->size();
  for (const EncodedChunk& c : *chunks) record.bytes += c.value.size();
  // The epoch record goes first, unsealed: if the process dies before the
  // prepare record seals it, Gc finds and removes the epoch's data.
  rocksdb::WriteBatch b;
  b.Put(meta_, keys::Epoch(*epoch), keys::EncodeEpoch(record));
  // Epoch numbers are never reused, even once Gc has dropped an epoch's
  // record: a reused number would overlap the old epoch's range tombstone.
  std::string hwm;
  keys::PutBE64(&hwm, *epoch);
  b.Put(meta_, keys::kEpochHighWater, hwm);
  HY_RETURN_IF_ERROR(WriteSynced(&b, "writing an epoch record"));

  const std::string file =
      path_ + "/hy-ingest-" + std::to_string(*epoch) + ".sst";
  Status s = WriteSst(file, *chunks, *epoch);
  if (s.ok()) s = ResumeAfterFailedWrite("ingesting " + file);
  if (s.ok()) {
    rocksdb::IngestExternalFileOptions io;
    io.move_files = true;
    io.snapshot_consistency = false;
    s = FromRocks(db_->IngestExternalFile(chunks_, {file}, io),
                  "ingesting " + file);
    if (!s.ok()) NoteFailedWrite(s);
  }
  if (!s.ok()) {
    // What a failed write left (a full disk, say) goes at once, not at the
    // next open: the space is what the next save needs. The unsealed epoch
    // record is Gc's to remove.
    std::error_code ec;
    fs::remove(file, ec);
  }
  return s;
}

Status RocksStore::WriteSst(const std::string& file,
                            const std::vector<EncodedChunk>& chunks,
                            uint64_t epoch) {
  rocksdb::SstFileWriter writer(
      rocksdb::EnvOptions(),
      rocksdb::Options(rocksdb::DBOptions(), chunk_cf_options_), chunks_);
  HY_RETURN_IF_ERROR(FromRocks(writer.Open(file), "creating " + file));
  for (const EncodedChunk& c : chunks) {
    HY_RETURN_IF_ERROR(
        FromRocks(writer.Put(keys::Chunk(epoch, c.address), c.value),
                  "writing " + file));
  }
  return FromRocks(writer.Finish(), "finishing " + file);
}

}  // namespace hy::statestore
