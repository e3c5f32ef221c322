// Store: the save path (Save, SaveAsync) and chunk ingestion.

#include <rocksdb/sst_file_writer.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <future>
#include <map>
#include <set>

#include "hy/metrics/hy_metrics.h"
#include "hy/metrics/scoped_timer.h"
#include "store_impl.h"

namespace hy::statestore {

namespace {

// A chunk's content address. A chunk stored as bf16 must never be mistaken
// for the same bytes stored losslessly, so the cast is part of its identity.
Hash128 ChunkAddress(ConstBytes raw, bool cast) {
  if (!cast) return ContentHash(raw);
  Hasher128 h;
  h.Update(std::string_view("hy:bf16:"));  // A prefix: no raw bytes alias it.
  h.Update(raw);
  return h.Digest();
}

// One chunk of one shard of the part being saved.
struct PendingChunk {
  size_t shard = 0;
  size_t index = 0;  // Within the shard.
  ConstBytes raw;
  Hash128 address;
};

// A possible XOR-delta base for a new chunk.
struct DeltaBase {
  bool usable = false;
  ChunkRef ref;
  uint8_t depth = 0;  // Depth the new chunk would have.
};

bool IsDelta(const std::string& encoded) {
  return encoded.size() > 5 && (static_cast<uint8_t>(encoded[5]) & 2) != 0;
}

}  // namespace

Status CheckSavePart(const SavePart& part) {
  if (part.rank < 0) return Status::InvalidArgument("rank must be >= 0");
  if (part.version > kMaxVersion) {
    return Status::InvalidArgument("version number too large");
  }
  std::set<std::string> names;
  for (const ShardData& s : part.shards) {
    HY_RETURN_IF_ERROR(s.meta.Validate());
    if (!names.insert(s.meta.name).second) {
      return Status::InvalidArgument("tensor '" + s.meta.name +
                                     "' appears twice in one save");
    }
    HY_RETURN_IF_ERROR(s.geometry.Validate(s.meta.shape)
                           .WithContext("tensor '" + s.meta.name + "'"));
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
  std::shared_lock<std::shared_mutex> gc(gc_mu_);
  const metrics::HyMetrics* m = options_.metrics;
  metrics::ScopedTimer timer(m ? m->checkpoint_save_duration : nullptr);
  SaveStats local;
  Status s = SaveLocked(part, &local, borrowed, [&] { releaser(); });
  if (!s.ok()) return s;
  if (m != nullptr) {
    m->checkpoint_written_bytes->Increment(
        static_cast<double>(local.new_bytes));
    m->checkpoint_logical_bytes->Increment(
        static_cast<double>(local.logical_bytes));
  }
  if (stats) *stats = local;
  return Status::OK();
}

Status RocksStore::SaveLocked(const SavePart& part, SaveStats* stats,
                              size_t borrowed,
                              const std::function<void()>& release) {
  const std::string where = "saving version " + std::to_string(part.version) +
                            " rank " + std::to_string(part.rank);
  {
    std::string ignored;
    Status s = Get(meta_, keys::Committed(part.version), &ignored);
    if (s.ok()) return Status::AlreadyExists(where + ": already committed");
    if (!s.IsNotFound()) return s;
    s = Get(meta_, keys::Aborted(part.version), &ignored);
    if (s.ok()) {
      return Status::FailedPrecondition(
          where + ": the version was aborted; save under a new version");
    }
    if (!s.IsNotFound()) return s;
    s = Get(meta_, keys::Prepared(part.version, part.rank), &ignored);
    if (s.ok()) {
      return Status::AlreadyExists(
          where +
          ": already prepared (an earlier save of it, perhaps by a "
          "process that died; Abort the version to save it anew)");
    }
    if (!s.IsNotFound()) return s;
  }

  // Cut shards into chunks and hash them.
  const uint64_t cb = options_.chunk_bytes;
  std::vector<PendingChunk> chunks;
  SaveStats st;
  for (size_t i = 0; i < part.shards.size(); ++i) {
    const ConstBytes data = part.shards[i].data;
    st.logical_bytes += data.size();
    for (uint64_t off = 0; off < data.size(); off += cb) {
      chunks.push_back({i,
                        off / cb,
                        data.subspan(off, std::min(cb, data.size() - off)),
                        {}});
    }
  }
  pool_->ParallelFor(chunks.size(), [&](size_t i) {
    const ShardData& s = part.shards[chunks[i].shard];
    chunks[i].address = ChunkAddress(
        chunks[i].raw, s.cast_to_bf16 && s.meta.dtype == DType::kF32);
  });
  st.chunks = chunks.size();

  // Which contents does the store already hold?
  std::map<Hash128, keys::ChunkLocation> known;
  std::vector<size_t> to_write;  // Indices into chunks, one per new address.
  std::set<Hash128> queued;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Hash128& a = chunks[i].address;
    if (known.count(a) || queued.count(a)) continue;
    std::string value;
    Status s = Get(meta_, keys::ChunkIndex(a), &value);
    if (s.ok()) {
      keys::ChunkLocation loc;
      if (!keys::DecodeLocation(value, &loc)) {
        return Status::DataLoss("corrupt chunk index entry " + a.ToHex());
      }
      known[a] = loc;
    } else if (s.IsNotFound()) {
      queued.insert(a);
      to_write.push_back(i);
    } else {
      return s;
    }
  }

  // The caller's buffers are read again only to encode their new chunks:
  // once the batch holding the last of those is encoded, they are free.
  size_t borrowed_to_write = 0;  // New chunks of borrowed shards (a prefix).
  while (borrowed_to_write < to_write.size() &&
         chunks[to_write[borrowed_to_write]].shard < borrowed) {
    ++borrowed_to_write;
  }
  if (borrowed_to_write == 0 && release) release();

  // Delta bases: the same chunk of the same shard in the previous version.
  std::vector<DeltaBase> bases(to_write.size());
  if (options_.delta_max_chain > 0 && !to_write.empty()) {
    HY_ASSIGN_OR_RETURN(auto prev, PreviousShards(part.version, part.rank));
    for (size_t j = 0; j < to_write.size(); ++j) {
      const PendingChunk& c = chunks[to_write[j]];
      const ShardData& s = part.shards[c.shard];
      auto it = prev.find(s.meta.name);
      if (it == prev.end() || it->second.geometry != s.geometry ||
          it->second.chunk_bytes != cb || c.index >= it->second.chunks.size() ||
          it->second.chunks[c.index].raw_length != c.raw.size()) {
        continue;
      }
      std::string value;
      keys::ChunkLocation loc;
      // The base must have been stored with the same cast as the new chunk:
      // XOR against a base of the other kind would mix representations.
      const bool cast = s.cast_to_bf16 && s.meta.dtype == DType::kF32;
      if (!Get(meta_, keys::ChunkIndex(it->second.chunks[c.index].address),
               &value)
               .ok() ||
          !keys::DecodeLocation(value, &loc) ||
          loc.depth + 1 > options_.delta_max_chain ||
          (loc.encoding.rfind("bf16+", 0) == 0) != cast) {
        continue;
      }
      bases[j] = {true, it->second.chunks[c.index],
                  static_cast<uint8_t>(loc.depth + 1)};
    }
  }

  // Encode and ingest the new chunks, a bounded batch at a time. Batch k is
  // written and ingested on its own thread while batch k + 1 is encoded.
  rocksdb::WriteBatch batch;
  std::vector<uint64_t> epochs;
  struct Batch {
    std::vector<EncodedChunk> encoded;
    uint64_t epoch = 0;
  };
  std::unique_ptr<Batch> in_flight;
  std::future<Status> writing;
  auto finish_write = [&]() -> Status {
    if (!writing.valid()) return Status::OK();
    HY_RETURN_IF_ERROR(writing.get().WithContext(where));
    epochs.push_back(in_flight->epoch);
    for (const EncodedChunk& e : in_flight->encoded) {
      Result<ChunkHeader> h = ParseChunkHeader(e.value);
      if (!h.ok()) return h.status().WithContext(where);
      const keys::ChunkLocation loc{in_flight->epoch, e.value.size(), e.depth,
                                    e.base, EncodingName(*h)};
      known[e.address] = loc;
      batch.Put(meta_, keys::ChunkIndex(e.address), keys::EncodeLocation(loc));
      st.new_bytes += e.value.size();
      ++st.new_chunks;
      if (e.depth > 0) ++st.delta_chunks;
    }
    in_flight.reset();
    return Status::OK();
  };
  for (size_t begin = 0; begin < to_write.size();) {
    size_t end = begin;
    uint64_t raw_bytes = 0;
    while (end < to_write.size() &&
           (end == begin || raw_bytes < options_.ingest_batch_bytes)) {
      raw_bytes += chunks[to_write[end]].raw.size();
      ++end;
    }
    auto next = std::make_unique<Batch>();
    next->encoded.resize(end - begin);
    std::vector<Status> results(end - begin);
    pool_->ParallelFor(end - begin, [&](size_t j) {
      const PendingChunk& c = chunks[to_write[begin + j]];
      const ShardData& s = part.shards[c.shard];
      const DeltaBase& base = bases[begin + j];
      EncodedChunk& out = next->encoded[j];
      EncodeOptions eo = options_.codec;
      eo.cast_to_bf16 = s.cast_to_bf16;
      out.address = c.address;
      if (base.usable) {
        // A base that cannot be read is no reason to fail the save: the
        // chunk is then stored in full.
        std::string base_raw(c.raw.size(), '\0');
        if (ReadChunk(base.ref, MutableBytes(base_raw)).ok()) {
          EncodeOptions de = eo;
          // Lossless chunks are addressed by ContentHash, so the base's
          // address is its hash; a cast base is hashed by the codec.
          if (!(s.cast_to_bf16 && s.meta.dtype == DType::kF32)) {
            de.base_hash = &base.ref.address;
          }
          std::string delta;
          if (EncodeChunk(de, s.meta.dtype, c.raw, base_raw, &delta).ok() &&
              IsDelta(delta)) {
            // A good delta is kept outright; a weak one only if it beats
            // the full encoding.
            bool keep = delta.size() * 3 <= c.raw.size() * 2;
            if (!keep) {
              results[j] = EncodeChunk(eo, s.meta.dtype, c.raw, {}, &out.value);
              keep = results[j].ok() && delta.size() < out.value.size();
              if (!keep) return;  // The full encoding (or its error) stands.
            }
            out.value = std::move(delta);
            out.depth = base.depth;
            out.base = base.ref.address;
            results[j] = Status::OK();
            return;
          }
        }
      }
      results[j] = EncodeChunk(eo, s.meta.dtype, c.raw, {}, &out.value);
    });
    if (borrowed_to_write > begin && borrowed_to_write <= end && release) {
      release();
    }
    for (Status& r : results) HY_RETURN_IF_ERROR(r.WithContext(where));
    HY_RETURN_IF_ERROR(finish_write());
    in_flight = std::move(next);
    Batch* b = in_flight.get();
    writing = std::async(std::launch::async, [this, b] {
      return WriteEpoch(&b->encoded, &b->epoch);
    });
    begin = end;
  }
  HY_RETURN_IF_ERROR(finish_write());

  // The rank manifest, blobs and prepared record, in one synced batch with
  // the index entries of the new chunks.
  RankManifest m;
  m.version = part.version;
  m.rank = part.rank;
  size_t next = 0;
  for (const ShardData& s : part.shards) {
    TensorEntry t;
    t.meta = s.meta;
    ShardEntry e;
    e.rank = part.rank;
    e.geometry = s.geometry;
    e.chunk_bytes = cb;
    for (uint64_t off = 0; off < s.data.size(); off += cb, ++next) {
      const keys::ChunkLocation& loc = known[chunks[next].address];
      e.chunks.push_back({chunks[next].address, chunks[next].raw.size(),
                          loc.stored_length, loc.encoding});
      st.stored_bytes += loc.stored_length;
    }
    t.shards.push_back(std::move(e));
    m.tensors.push_back(std::move(t));
  }
  for (const BlobData& b : part.blobs) {
    m.blobs.push_back({b.name, b.rank, b.data.size(), ContentHash(b.data)});
    batch.Put(manifests_, keys::Blob(part.version, b.rank, b.name),
              rocksdb::Slice(reinterpret_cast<const char*>(b.data.data()),
                             b.data.size()));
  }
  m.logical_bytes = st.logical_bytes;
  m.stored_bytes = st.stored_bytes;
  m.new_bytes = st.new_bytes;
  batch.Put(manifests_, keys::RankPart(part.version, part.rank),
            EncodeRankManifest(m));
  for (uint64_t epoch : epochs) {
    std::string value;
    HY_RETURN_IF_ERROR(Get(meta_, keys::Epoch(epoch), &value));
    keys::EpochRecord r;
    keys::DecodeEpoch(value, &r);
    r.sealed = true;
    batch.Put(meta_, keys::Epoch(epoch), keys::EncodeEpoch(r));
  }
  batch.Put(meta_, keys::Prepared(part.version, part.rank), "");
  {
    std::lock_guard<std::mutex> lock(commit_mu_);
    std::string ignored;
    if (Get(meta_, keys::Prepared(part.version, part.rank), &ignored).ok()) {
      return Status::AlreadyExists(where + ": prepared concurrently");
    }
    HY_RETURN_IF_ERROR(WriteSynced(&batch, where));
  }
  if (stats) *stats = st;
  return Status::OK();
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
  rocksdb::SstFileWriter writer(
      rocksdb::EnvOptions(),
      rocksdb::Options(rocksdb::DBOptions(), chunk_cf_options_), chunks_);
  HY_RETURN_IF_ERROR(FromRocks(writer.Open(file), "creating " + file));
  for (const EncodedChunk& c : *chunks) {
    HY_RETURN_IF_ERROR(
        FromRocks(writer.Put(keys::Chunk(*epoch, c.address), c.value),
                  "writing " + file));
  }
  HY_RETURN_IF_ERROR(FromRocks(writer.Finish(), "finishing " + file));
  rocksdb::IngestExternalFileOptions io;
  io.move_files = true;
  io.snapshot_consistency = false;
  return FromRocks(db_->IngestExternalFile(chunks_, {file}, io),
                   "ingesting " + file);
}

}  // namespace hy::statestore
