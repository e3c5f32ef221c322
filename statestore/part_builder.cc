// PartBuilder (see part_builder.h): the save path's chunk pipeline.

#include "part_builder.h"

#include <algorithm>
#include <deque>
#include <future>
#include <memory>

#include "hy/metrics/hy_metrics.h"

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

bool IsDelta(const std::string& encoded) {
  return encoded.size() > 5 && (static_cast<uint8_t>(encoded[5]) & 2) != 0;
}

}  // namespace

PartBuilder::PartBuilder(RocksStore* store, uint64_t version, int rank)
    : store_(store),
      version_(version),
      rank_(rank),
      where_("saving version " + std::to_string(version) + " rank " +
             std::to_string(rank)) {}

Status PartBuilder::Start() {
  RocksStore& s = *store_;
  std::string ignored;
  Status st = s.Get(s.meta_, keys::Committed(version_), &ignored);
  if (st.ok()) return Status::AlreadyExists(where_ + ": already committed");
  if (!st.IsNotFound()) return st;
  st = s.Get(s.meta_, keys::Aborted(version_), &ignored);
  if (st.ok()) {
    return Status::FailedPrecondition(
        where_ + ": the version was aborted; save under a new version");
  }
  if (!st.IsNotFound()) return st;
  st = s.Get(s.meta_, keys::Prepared(version_, rank_), &ignored);
  if (st.ok()) {
    return Status::AlreadyExists(
        where_ +
        ": already prepared (an earlier save of it, perhaps by a process that "
        "died; Abort the version to save it anew)");
  }
  if (!st.IsNotFound()) return st;
  return Status::OK();
}

Status PartBuilder::BeginShard(
    const TensorMeta& meta, const ShardGeometry& geometry, bool cast_to_bf16,
    std::function<void(ConstBytes)> after_chunk_read) {
  HY_RETURN_IF_ERROR(CheckShard(meta, geometry, &names_));
  Shard s;
  s.meta = meta;
  s.geometry = geometry;
  s.cast = cast_to_bf16 && meta.dtype == DType::kF32;
  s.bytes =
      static_cast<uint64_t>(geometry.NumElements()) * DTypeSize(meta.dtype);
  s.after_chunk_read = std::move(after_chunk_read);
  shards_.push_back(std::move(s));
  return Status::OK();
}

void PartBuilder::DoneReading(const PendingChunk& c) const {
  const auto& fn = shards_[c.shard].after_chunk_read;
  if (fn) fn(c.raw);
}

PartBuilder::DeltaBase PartBuilder::FindBase(const PendingChunk& c) {
  const Shard& s = shards_[c.shard];
  const uint64_t cb = store_->options_.chunk_bytes;
  auto it = previous_->find(s.meta.name);
  if (it == previous_->end() || it->second.geometry != s.geometry ||
      it->second.chunk_bytes != cb || c.index >= it->second.chunks.size() ||
      it->second.chunks[c.index].raw_length != c.raw.size()) {
    return {};
  }
  std::string value;
  keys::ChunkLocation loc;
  // The base must have been stored with the same cast as the new chunk:
  // XOR against a base of the other kind would mix representations.
  const ChunkRef& ref = it->second.chunks[c.index];
  if (!store_->Get(store_->meta_, keys::ChunkIndex(ref.address), &value).ok() ||
      !keys::DecodeLocation(value, &loc) ||
      loc.depth + 1 > store_->options_.delta_max_chain ||
      (loc.encoding.rfind("bf16+", 0) == 0) != s.cast) {
    return {};
  }
  return {true, ref, static_cast<uint8_t>(loc.depth + 1)};
}

Status PartBuilder::EncodeOne(const PendingChunk& c, const DeltaBase& base,
                              EncodedChunk* out) {
  const Shard& s = shards_[c.shard];
  EncodeOptions eo = store_->options_.codec;
  eo.cast_to_bf16 = s.cast;
  out->address = c.address;
  eo.address = &out->address;  // Version 2 headers name it.
  if (base.usable) {
    // A base that cannot be read is no reason to fail the save: the chunk
    // is then stored in full.
    std::string base_raw(c.raw.size(), '\0');
    if (store_->ReadChunk(base.ref, MutableBytes(base_raw)).ok()) {
      EncodeOptions de = eo;
      // Lossless chunks are addressed by ContentHash, so the base's address
      // is its hash; a cast base is hashed by the codec.
      if (!s.cast) de.base_hash = &base.ref.address;
      std::string delta;
      if (EncodeChunk(de, s.meta.dtype, c.raw, base_raw, &delta).ok() &&
          IsDelta(delta)) {
        // A good delta is kept outright; a weak one only if it beats the
        // full encoding.
        if (delta.size() * 3 > c.raw.size() * 2) {
          HY_RETURN_IF_ERROR(
              EncodeChunk(eo, s.meta.dtype, c.raw, {}, &out->value));
          if (delta.size() >= out->value.size()) return Status::OK();
        }
        out->value = std::move(delta);
        out->depth = base.depth;
        out->base = base.ref.address;
        return Status::OK();
      }
    }
  }
  return EncodeChunk(eo, s.meta.dtype, c.raw, {}, &out->value);
}

Status PartBuilder::AddChunks(std::vector<PendingChunk>* chunks_in,
                              size_t borrowed,
                              const std::function<void()>& release) {
  std::vector<PendingChunk>& chunks = *chunks_in;
  store_->ParallelFor(chunks.size(), [&](size_t i) {
    chunks[i].address =
        ChunkAddress(chunks[i].raw, shards_[chunks[i].shard].cast);
    DoneReading(chunks[i]);
  });
  stats_.chunks += chunks.size();

  // Which contents does the store already hold? One index lookup per
  // distinct address, in order.
  struct Lookup {
    size_t chunk = 0;    // The first of chunks with this address.
    Status status;       // Of the index lookup (NotFound: new content).
    std::string value;   // The index entry.
    bool check = false;  // Held but not checked since the store opened.
  };
  std::vector<Lookup> lookups;
  std::set<Hash128> seen;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Hash128& a = chunks[i].address;
    shards_[chunks[i].shard].chunks.emplace_back(a, chunks[i].raw.size());
    if (known_.count(a) || !seen.insert(a).second) continue;
    Lookup& l = lookups.emplace_back();
    l.chunk = i;
    l.status = store_->Get(store_->meta_, keys::ChunkIndex(a), &l.value);
    if (l.status.ok() && store_->IsDamaged(a)) {
      // Quarantined (found damaged by a read): written again at once.
      ++stats_.rewritten_chunks;
      l.status = Status::NotFound("damaged");
    } else if (l.status.ok() && !store_->IsVerified(a)) {
      l.check = true;
    }
  }
  // Held chunks not checked since this store was opened are read back, in
  // parallel, before they are referenced; a damaged one is written again
  // (its index entry then names the new copy, healing every version using
  // it).
  std::vector<size_t> checks;
  for (size_t k = 0; k < lookups.size(); ++k) {
    if (lookups[k].check) checks.push_back(k);
  }
  std::vector<Status> verified(checks.size());
  store_->ParallelFor(checks.size(), [&](size_t j) {
    const PendingChunk& c = chunks[lookups[checks[j]].chunk];
    thread_local std::string back;
    back.resize(c.raw.size());
    verified[j] =
        store_->ReadChunkAt(c.address, back.size(), MutableBytes(back), 0);
  });
  for (size_t j = 0; j < checks.size(); ++j) {
    if (verified[j].IsDataLoss()) {
      ++stats_.rewritten_chunks;
      lookups[checks[j]].status = Status::NotFound("damaged");
    } else if (!verified[j].ok()) {
      return verified[j].WithContext(where_);
    }
  }
  std::vector<size_t> to_write;  // Indices into chunks, one per new address.
  for (Lookup& l : lookups) {
    const Hash128& a = chunks[l.chunk].address;
    if (l.status.ok()) {
      keys::ChunkLocation loc;
      if (!keys::DecodeLocation(l.value, &loc)) {
        return Status::DataLoss("corrupt chunk index entry " + a.ToHex());
      }
      known_[a] = loc;
    } else if (l.status.IsNotFound()) {
      to_write.push_back(l.chunk);
    } else {
      return l.status;
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
  if (store_->options_.delta_max_chain > 0 && !to_write.empty()) {
    if (!previous_) {
      HY_ASSIGN_OR_RETURN(previous_, store_->PreviousShards(version_, rank_));
    }
    for (size_t j = 0; j < to_write.size(); ++j) {
      bases[j] = FindBase(chunks[to_write[j]]);
    }
  }

  // Encode and ingest the new chunks, a bounded batch at a time. Batches
  // k - writers + 1 .. k are written and ingested, each on its own thread,
  // while batch k + 1 is encoded; they are recorded in order.
  struct Batch {
    std::vector<EncodedChunk> encoded;
    uint64_t epoch = 0;
  };
  struct InFlight {
    std::unique_ptr<Batch> batch;
    std::future<Status> writing;  // Destroyed first: waits for the write.
  };
  std::deque<InFlight> in_flight;
  const size_t writers = static_cast<size_t>(store_->options_.ingest_writers);
  const uint64_t batch_bytes = store_->options_.ingest_batch_bytes / writers;
  auto finish_write = [&]() -> Status {
    if (in_flight.empty()) return Status::OK();
    InFlight f = std::move(in_flight.front());
    in_flight.pop_front();
    HY_RETURN_IF_ERROR(f.writing.get().WithContext(where_));
    epochs_.push_back(f.batch->epoch);
    for (const EncodedChunk& e : f.batch->encoded) {
      Result<ChunkHeader> h = ParseChunkHeader(e.value);
      if (!h.ok()) return h.status().WithContext(where_);
      const keys::ChunkLocation loc{f.batch->epoch, e.value.size(), e.depth,
                                    e.base, EncodingName(*h)};
      known_[e.address] = loc;
      store_->MarkVerified(e.address);
      batch_.Put(store_->meta_, keys::ChunkIndex(e.address),
                 keys::EncodeLocation(loc));
      stats_.new_bytes += e.value.size();
      ++stats_.new_chunks;
      if (e.depth > 0) ++stats_.delta_chunks;
    }
    for (EncodedChunk& e : f.batch->encoded) {
      spare_.push_back(std::move(e.value));
    }
    return Status::OK();
  };
  for (size_t begin = 0; begin < to_write.size();) {
    size_t end = begin;
    uint64_t raw_bytes = 0;
    while (end < to_write.size() && (end == begin || raw_bytes < batch_bytes)) {
      raw_bytes += chunks[to_write[end]].raw.size();
      ++end;
    }
    auto next = std::make_unique<Batch>();
    next->encoded.resize(end - begin);
    for (EncodedChunk& e : next->encoded) {
      if (spare_.empty()) break;
      e.value = std::move(spare_.back());
      spare_.pop_back();
    }
    std::vector<Status> results(end - begin);
    store_->ParallelFor(end - begin, [&](size_t j) {
      results[j] = EncodeOne(chunks[to_write[begin + j]], bases[begin + j],
                             &next->encoded[j]);
      DoneReading(chunks[to_write[begin + j]]);
    });
    if (borrowed_to_write > begin && borrowed_to_write <= end && release) {
      release();
    }
    for (Status& r : results) HY_RETURN_IF_ERROR(r.WithContext(where_));
    if (in_flight.size() >= writers) HY_RETURN_IF_ERROR(finish_write());
    Batch* b = next.get();
    std::future<Status> writing = std::async(std::launch::async, [this, b] {
      return store_->WriteEpoch(&b->encoded, &b->epoch);
    });
    in_flight.push_back({std::move(next), std::move(writing)});
    begin = end;
  }
  while (!in_flight.empty()) HY_RETURN_IF_ERROR(finish_write());
  return Status::OK();
}

Status PartBuilder::Finish(const std::vector<BlobData>& blobs,
                           SaveStats* stats) {
  SavePart just_blobs;
  just_blobs.version = version_;
  just_blobs.rank = rank_;
  just_blobs.blobs = blobs;
  HY_RETURN_IF_ERROR(CheckSavePart(just_blobs));
  // The rank manifest, blobs and prepared record, in one synced batch with
  // the index entries of the new chunks.
  const uint64_t cb = store_->options_.chunk_bytes;
  RankManifest m;
  m.version = version_;
  m.rank = rank_;
  for (const Shard& s : shards_) {
    if (s.chunks.size() != (s.bytes + cb - 1) / cb) {
      return Status::InvalidArgument(
          where_ + ": tensor '" + s.meta.name + "' got " +
          std::to_string(s.chunks.size()) + " chunks of its " +
          std::to_string(s.bytes) + " bytes");
    }
    TensorEntry t;
    t.meta = s.meta;
    ShardEntry e;
    e.rank = rank_;
    e.geometry = s.geometry;
    e.chunk_bytes = cb;
    for (const auto& [address, raw_length] : s.chunks) {
      const keys::ChunkLocation& loc = known_[address];
      e.chunks.push_back(
          {address, raw_length, loc.stored_length, loc.encoding});
      stats_.stored_bytes += loc.stored_length;
    }
    stats_.logical_bytes += s.bytes;
    t.shards.push_back(std::move(e));
    m.tensors.push_back(std::move(t));
  }
  for (const BlobData& b : blobs) {
    m.blobs.push_back({b.name, b.rank, b.data.size(), ContentHash(b.data)});
    batch_.Put(store_->manifests_, keys::Blob(version_, b.rank, b.name),
               rocksdb::Slice(reinterpret_cast<const char*>(b.data.data()),
                              b.data.size()));
  }
  m.logical_bytes = stats_.logical_bytes;
  m.stored_bytes = stats_.stored_bytes;
  m.new_bytes = stats_.new_bytes;
  batch_.Put(store_->manifests_, keys::RankPart(version_, rank_),
             EncodeRankManifest(m));
  for (uint64_t epoch : epochs_) {
    std::string value;
    HY_RETURN_IF_ERROR(store_->Get(store_->meta_, keys::Epoch(epoch), &value));
    keys::EpochRecord r;
    keys::DecodeEpoch(value, &r);
    r.sealed = true;
    batch_.Put(store_->meta_, keys::Epoch(epoch), keys::EncodeEpoch(r));
  }
  batch_.Put(store_->meta_, keys::Prepared(version_, rank_), "");
  {
    std::lock_guard<std::mutex> lock(store_->commit_mu_);
    std::string ignored;
    if (store_->Get(store_->meta_, keys::Prepared(version_, rank_), &ignored)
            .ok()) {
      return Status::AlreadyExists(where_ + ": prepared concurrently");
    }
    HY_RETURN_IF_ERROR(store_->WriteSynced(&batch_, where_));
  }
  if (const metrics::HyMetrics* m = store_->options_.metrics) {
    m->checkpoint_written_bytes->Increment(
        static_cast<double>(stats_.new_bytes));
    m->checkpoint_logical_bytes->Increment(
        static_cast<double>(stats_.logical_bytes));
  }
  if (stats) *stats = stats_;
  return Status::OK();
}

}  // namespace hy::statestore
