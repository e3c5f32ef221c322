// Store: the read path (ReadRegion, ReadShard, ReadBlob) and Verify.

#include <algorithm>
#include <cstring>
#include <map>

#include "hy/metrics/hy_metrics.h"
#include "store_impl.h"

namespace hy::statestore {

namespace {

// One copy from a decoded chunk into the output buffer.
struct Piece {
  uint64_t chunk_offset = 0;  // Bytes into the decoded chunk.
  uint64_t out_offset = 0;    // Bytes into the output.
  uint64_t length = 0;
};

struct ChunkTask {
  ChunkRef ref;
  std::vector<Piece> pieces;
};

// Per-thread buffer for one decoded chunk.
std::string& ChunkScratch(size_t n) {
  thread_local std::string buf;
  if (buf.size() < n) buf.resize(n);
  return buf;
}

// Removes from `piece` (global element range) what `covered` already holds
// and returns the uncovered parts. `covered` maps begin -> end, disjoint.
std::vector<FlatRun> Uncovered(const std::map<int64_t, int64_t>& covered,
                               FlatRun piece) {
  std::vector<FlatRun> out;
  int64_t pos = piece.offset;
  const int64_t end = piece.end();
  auto it = covered.upper_bound(pos);
  if (it != covered.begin()) --it;
  for (; it != covered.end() && it->first < end && pos < end; ++it) {
    if (it->second <= pos) continue;
    if (it->first > pos) out.push_back({pos, it->first - pos});
    pos = std::max(pos, it->second);
  }
  if (pos < end) out.push_back({pos, end - pos});
  return out;
}

void AddCovered(std::map<int64_t, int64_t>* covered, FlatRun run) {
  (*covered)[run.offset] = run.end();  // Disjoint by construction.
}

}  // namespace

Status RocksStore::ReadChunk(const ChunkRef& ref, MutableBytes out) {
  return ReadChunkAt(ref.address, ref.raw_length, out, 0);
}

Status RocksStore::ReadChunk(const Hash128& address, uint64_t raw_length,
                             MutableBytes out) {
  std::shared_lock<std::shared_mutex> gc(gc_mu_);
  std::string ignored;
  Status s = Get(meta_, keys::ChunkIndex(address), &ignored);
  if (s.IsNotFound()) {
    return Status::NotFound("no chunk " + address.ToHex() + " in " + path_);
  }
  HY_RETURN_IF_ERROR(s);
  return ReadChunkAt(address, raw_length, out, 0);
}

Status RocksStore::ReadChunkAt(const Hash128& address, uint64_t raw_length,
                               MutableBytes out, int level, int* format) {
  Status s = ReadChunkUnchecked(address, raw_length, out, level, format);
  if (s.IsDataLoss()) Quarantine(address, s);
  return s;
}

void RocksStore::Quarantine(const Hash128& address, const Status& why) {
  {
    std::lock_guard<std::mutex> lock(verified_mu_);
    verified_.erase(address);
    if (!damaged_.insert(address).second) return;
  }
  if (options_.metrics != nullptr)
    options_.metrics->damaged_chunks->Increment();
  if (options_.on_damaged_chunk) options_.on_damaged_chunk(path_, address, why);
}

bool RocksStore::IsDamaged(const Hash128& address) {
  std::lock_guard<std::mutex> lock(verified_mu_);
  return damaged_.count(address) > 0;
}

std::vector<Hash128> RocksStore::DamagedChunks() {
  std::lock_guard<std::mutex> lock(verified_mu_);
  return {damaged_.begin(), damaged_.end()};
}

Status RocksStore::ReadChunkUnchecked(const Hash128& address,
                                      uint64_t raw_length, MutableBytes out,
                                      int level, int* format) {
  // Chains are bounded by delta_max_chain when written; a deeper one is
  // damage (or a cycle), not data.
  constexpr int kMaxChainDepth = 255;
  if (level > kMaxChainDepth) {
    return Status::DataLoss("delta chain through chunk " + address.ToHex() +
                            " is deeper than any hy writes");
  }
  ChunkRef ref;
  ref.address = address;
  ref.raw_length = raw_length;
  std::string loc_value;
  Status s = Get(meta_, keys::ChunkIndex(ref.address), &loc_value);
  keys::ChunkLocation loc;
  if (s.IsNotFound() || (s.ok() && !keys::DecodeLocation(loc_value, &loc))) {
    return Status::DataLoss("chunk " + ref.address.ToHex() +
                            " is missing from the chunk index");
  }
  HY_RETURN_IF_ERROR(s);
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  // RocksDB's block checksum would be one more pass over every stored
  // byte: the chunk's own checksums cover every byte of it (header, body),
  // and its header names its address, so a block that is damaged or read
  // from the wrong place is caught below all the same.
  ro.verify_checksums = false;
  rocksdb::PinnableSlice value;
  rocksdb::Status rs =
      db_->Get(ro, chunks_, keys::Chunk(loc.epoch, ref.address), &value);
  if (rs.IsNotFound()) {
    return Status::DataLoss("chunk " + ref.address.ToHex() +
                            " is missing from epoch " +
                            std::to_string(loc.epoch));
  }
  HY_RETURN_IF_ERROR(FromRocks(rs, "reading chunk " + ref.address.ToHex()));
  const ConstBytes encoded(value.data(), value.size());
  Result<ChunkHeader> h = ParseChunkHeader(encoded);
  if (!h.ok()) return h.status().WithContext("chunk " + ref.address.ToHex());
  if (h->version >= 2 && !h->address.IsZero() &&
      h->address != ref.address) {
    return Status::DataLoss("chunk " + ref.address.ToHex() +
                            " holds the bytes of chunk " +
                            h->address.ToHex());
  }
  if (format != nullptr) *format = h->version;
  if (h->raw_length != ref.raw_length) {
    return Status::DataLoss("chunk " + ref.address.ToHex() + " decodes to " +
                            std::to_string(h->raw_length) +
                            " bytes, the manifest says " +
                            std::to_string(ref.raw_length));
  }
  const bool addressed = h->version >= 2 && !h->address.IsZero();
  // Scrub: a version 2 chunk that names its address is checked by its
  // checksums over the stored bytes alone; decoding it would check nothing
  // more. Anything else is decoded into scratch and checked as a read is.
  const bool scrub = out.data() == nullptr;
  if (scrub && !addressed) {
    out = MutableBytes(ChunkScratch(raw_length).data(), raw_length);
  }
  const bool decode = !(scrub && addressed);
  std::string base;
  if (h->xor_delta) {
    if (loc.depth == 0) {
      return Status::DataLoss("chunk " + ref.address.ToHex() +
                              " is a delta but its index entry names no base");
    }
    if (decode) base.resize(raw_length);
    HY_RETURN_IF_ERROR(
        ReadChunkAt(loc.base, raw_length,
                    decode ? MutableBytes(base) : MutableBytes(), level + 1)
            .WithContext("base of chunk " + ref.address.ToHex()));
  }
  if (!decode) {
    HY_RETURN_IF_ERROR(
        VerifyChunk(encoded).status().WithContext("chunk " +
                                                  ref.address.ToHex()));
    MarkVerified(ref.address);
    return Status::OK();
  }
  // A version 1 lossless chunk is checked against its address below, which
  // makes the codec's checksum of the decoded bytes redundant (bf16-cast
  // chunks keep it: they have no address to match). A version 2 chunk
  // checks every stored byte as it decodes, and its header (checked) names
  // the address it was written under: hashing the decoded bytes again would
  // be a second pass over them that proves nothing more.
  HY_RETURN_IF_ERROR(DecodeChunkHashedByCaller(encoded, base, out)
                         .WithContext("chunk " + ref.address.ToHex()));
  if (!h->bf16_cast && !addressed && ContentHash(out) != ref.address) {
    return Status::DataLoss("chunk " + ref.address.ToHex() +
                            " does not match its address");
  }
  MarkVerified(ref.address);
  return Status::OK();
}

bool RocksStore::IsVerified(const Hash128& address) {
  std::lock_guard<std::mutex> lock(verified_mu_);
  return verified_.count(address) > 0;
}

void RocksStore::MarkVerified(const Hash128& address) {
  std::lock_guard<std::mutex> lock(verified_mu_);
  verified_.insert(address);
  damaged_.erase(address);
}

Status RocksStore::ReadRegion(uint64_t version, const std::string& tensor,
                              FlatRun region, MutableBytes out) {
  std::shared_lock<std::shared_mutex> gc(gc_mu_);
  HY_ASSIGN_OR_RETURN(std::shared_ptr<const Manifest> m,
                      ReadManifestLocked(version));
  HY_ASSIGN_OR_RETURN(const TensorEntry* t, FindTensor(*m, tensor));
  const TensorMeta& meta = t->meta;
  const uint64_t es = DTypeSize(meta.dtype);
  const int64_t numel = *meta.NumElements();
  if (region.offset < 0 || region.length < 0 || region.offset > numel ||
      region.length > numel - region.offset) {
    return Status::InvalidArgument("region outside tensor '" + tensor + "'");
  }
  if (out.size() != static_cast<uint64_t>(region.length) * es) {
    return Status::InvalidArgument("output buffer has the wrong size");
  }

  // Plan: which chunks hold which parts of the region. A replicated region
  // is read once, from the first shard (in rank order) that holds it.
  std::map<int64_t, int64_t> covered;
  std::vector<ChunkTask> tasks;
  for (const ShardEntry& s : t->shards) {
    HY_ASSIGN_OR_RETURN(std::vector<FlatRun> runs,
                        s.geometry.ToFlatRuns(meta.shape));
    std::map<size_t, size_t> task_of_chunk;
    for (const RunOverlap& o : IntersectRuns(runs, region)) {
      for (const FlatRun& u :
           Uncovered(covered, FlatRun{o.global_offset, o.length})) {
        AddCovered(&covered, u);
        uint64_t local = (o.local_offset + (u.offset - o.global_offset)) * es;
        uint64_t dst = (u.offset - region.offset) * es;
        uint64_t left = u.length * es;
        while (left > 0) {
          const size_t ci = local / s.chunk_bytes;
          if (ci >= s.chunks.size()) {
            return Status::DataLoss("shard of '" + tensor +
                                    "' has too few chunks");
          }
          const uint64_t in_chunk = local - ci * s.chunk_bytes;
          const uint64_t n = std::min(left, s.chunks[ci].raw_length - in_chunk);
          auto [it, fresh] = task_of_chunk.emplace(ci, tasks.size());
          if (fresh) tasks.push_back({s.chunks[ci], {}});
          tasks[it->second].pieces.push_back({in_chunk, dst, n});
          local += n;
          dst += n;
          left -= n;
        }
      }
    }
  }
  int64_t total = 0;
  for (const auto& [b, e] : covered) total += e - b;
  if (total != region.length) {
    return Status::DataLoss("no shard of '" + tensor + "' in version " +
                            std::to_string(version) +
                            " holds part of the region");
  }

  // In address order: the order a save's chunks sit in its SST files (keys
  // are epoch, address), so the threads of a cold read walk each file front
  // to back together and the kernel's readahead runs ahead of them.
  std::sort(tasks.begin(), tasks.end(),
            [](const ChunkTask& a, const ChunkTask& b) {
              return a.ref.address < b.ref.address;
            });
  // Decode the chunks in parallel, each into a per-thread buffer.
  std::vector<Status> results(tasks.size());
  auto decode = [&](size_t i) {
    const ChunkTask& t = tasks[i];
    if (t.pieces.size() == 1 && t.pieces[0].length == t.ref.raw_length) {
      // The whole chunk lands in one place: decode straight into it.
      results[i] = ReadChunk(
          t.ref, out.subspan(t.pieces[0].out_offset, t.ref.raw_length));
      return;
    }
    std::string& buf = ChunkScratch(t.ref.raw_length);
    MutableBytes chunk(buf.data(), t.ref.raw_length);
    results[i] = ReadChunk(t.ref, chunk);
    if (!results[i].ok()) return;
    for (const Piece& p : t.pieces) {
      std::memcpy(out.data() + p.out_offset, chunk.data() + p.chunk_offset,
                  p.length);
    }
  };
  ParallelFor(tasks.size(), decode);
  for (Status& s : results) HY_RETURN_IF_ERROR(s);
  return Status::OK();
}

Status RocksStore::ReadShard(uint64_t version, const std::string& tensor,
                             int rank, MutableBytes out) {
  std::shared_lock<std::shared_mutex> gc(gc_mu_);
  HY_ASSIGN_OR_RETURN(std::shared_ptr<const Manifest> m,
                      ReadManifestLocked(version));
  HY_ASSIGN_OR_RETURN(const TensorEntry* t, FindTensor(*m, tensor));
  for (const ShardEntry& s : t->shards) {
    if (s.rank != rank) continue;
    uint64_t bytes = 0;
    for (const ChunkRef& c : s.chunks) bytes += c.raw_length;
    if (out.size() != bytes) {
      return Status::InvalidArgument(
          "output buffer has " + std::to_string(out.size()) +
          " bytes, the shard " + std::to_string(bytes));
    }
    // In address order, as in ReadRegion.
    std::vector<size_t> order(s.chunks.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return s.chunks[a].address < s.chunks[b].address;
    });
    std::vector<Status> results(s.chunks.size());
    ParallelFor(order.size(), [&](size_t k) {
      const size_t i = order[k];
      results[i] = ReadChunk(
          s.chunks[i], out.subspan(i * s.chunk_bytes, s.chunks[i].raw_length));
    });
    for (Status& st : results) HY_RETURN_IF_ERROR(st);
    return Status::OK();
  }
  return Status::NotFound("rank " + std::to_string(rank) +
                          " holds no shard of '" + tensor + "'");
}

Result<std::string> RocksStore::ReadBlob(uint64_t version,
                                         const std::string& name, int rank) {
  std::shared_lock<std::shared_mutex> gc(gc_mu_);
  HY_ASSIGN_OR_RETURN(std::shared_ptr<const Manifest> m,
                      ReadManifestLocked(version));
  return ReadBlobLocked(*m, name, rank);
}

Result<std::string> RocksStore::ReadBlobLocked(const Manifest& m,
                                               const std::string& name,
                                               int rank) {
  const uint64_t version = m.commit.version;
  for (const BlobEntry& b : m.blobs) {
    if (b.name != name || b.rank != rank) continue;
    std::string value;
    Status s = Get(manifests_, keys::Blob(version, rank, name), &value);
    if (s.IsNotFound())
      return Status::DataLoss("blob '" + name + "' is missing");
    HY_RETURN_IF_ERROR(s);
    if (value.size() != b.size || ContentHash(value) != b.hash) {
      return Status::DataLoss("blob '" + name + "' is damaged");
    }
    return value;
  }
  return Status::NotFound("no blob '" + name + "' for rank " +
                          std::to_string(rank) + " in version " +
                          std::to_string(version));
}

Result<VerifyReport> RocksStore::Verify(uint64_t version) {
  std::shared_lock<std::shared_mutex> gc(gc_mu_);
  HY_ASSIGN_OR_RETURN(std::shared_ptr<const Manifest> shared,
                      ReadManifestLocked(version));
  const Manifest& m = *shared;
  struct Item {
    const std::string* tensor;
    int rank;
    size_t index;
    const ChunkRef* ref;
  };
  std::vector<Item> items;
  for (const auto& [name, t] : m.tensors) {
    for (const ShardEntry& s : t.shards) {
      for (size_t i = 0; i < s.chunks.size(); ++i) {
        items.push_back({&name, s.rank, i, &s.chunks[i]});
      }
    }
  }
  // In address order: the order a save's chunks sit in its SST files (keys
  // are epoch, address), so a cold scrub reads each file front to back.
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.ref->address < b.ref->address;
  });
  VerifyReport report;
  std::mutex mu;
  ParallelFor(items.size(), [&](size_t i) {
    const Item& it = items[i];
    int format = 0;
    Status s = ReadChunkAt(it.ref->address, it.ref->raw_length,
                           MutableBytes(), 0, &format);
    std::lock_guard<std::mutex> lock(mu);
    ++report.chunks_checked;
    if (format > 0) ++report.chunks_by_format[format];
    report.bytes_checked += it.ref->raw_length;
    if (!s.ok()) {
      report.bad.push_back({*it.tensor, it.rank, it.index, it.ref->address, s});
    }
  });
  std::sort(report.bad.begin(), report.bad.end(),
            [](const BadChunk& a, const BadChunk& b) {
              return std::tie(a.tensor, a.rank, a.index) <
                     std::tie(b.tensor, b.rank, b.index);
            });
  for (const BlobEntry& b : m.blobs) {
    Result<std::string> data = ReadBlobLocked(m, b.name, b.rank);
    if (!data.ok()) {
      report.bad.push_back(
          {"blob:" + b.name, b.rank, 0, b.hash, data.status()});
    }
  }
  return report;
}

}  // namespace hy::statestore
