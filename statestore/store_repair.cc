// Store: Repair, which writes damaged chunks again from another copy.
//
// Order of writes, as for a save: the new chunks are ingested as a new epoch
// (recorded unsealed first, so a crash leaves only garbage for Gc), then one
// synced batch points the chunk index at them and seals the epoch. The
// damaged bytes stay in their old epoch, unreferenced, until Gc drops or
// repacks it.

#include <rocksdb/write_batch.h>

#include <map>

#include "store_impl.h"

namespace hy::statestore {

namespace {

// A damaged chunk and what encoding it again needs.
struct Damaged {
  BadChunk bad;
  uint64_t raw_length = 0;
  DType dtype = DType::kU8;
  bool cast = false;  // Stored as bf16: the copy's bytes are widened f32.
};

// The chunk `bad` names in `m`, or nullptr.
const ChunkRef* FindChunk(const Manifest& m, const BadChunk& bad,
                          DType* dtype) {
  auto t = m.tensors.find(bad.tensor);
  if (t == m.tensors.end()) return nullptr;
  for (const ShardEntry& s : t->second.shards) {
    if (s.rank != bad.rank || bad.index >= s.chunks.size()) continue;
    *dtype = t->second.meta.dtype;
    return &s.chunks[bad.index];
  }
  return nullptr;
}

}  // namespace

Result<RepairReport> RocksStore::Repair(const ChunkSource& source) {
  if (read_only()) return Status::FailedPrecondition("store is read-only");
  RepairReport report;
  HY_ASSIGN_OR_RETURN(std::vector<VersionInfo> versions, ListVersions());
  std::map<Hash128, Damaged> damaged;
  for (const VersionInfo& v : versions) {
    if (!v.committed) continue;
    HY_ASSIGN_OR_RETURN(VerifyReport r, Verify(v.version));
    ++report.versions_checked;
    report.chunks_checked += r.chunks_checked;
    if (r.bad.empty()) continue;
    HY_ASSIGN_OR_RETURN(Manifest m, ReadManifest(v.version));
    for (const BadChunk& b : r.bad) {
      if (damaged.count(b.address) > 0) continue;
      Damaged d;
      d.bad = b;
      const ChunkRef* ref = FindChunk(m, b, &d.dtype);
      if (ref == nullptr) {  // A damaged blob: not a chunk to write again.
        report.unrepaired.push_back(b);
        continue;
      }
      d.raw_length = ref->raw_length;
      d.cast = ref->encoding.rfind("bf16+", 0) == 0;
      damaged.emplace(b.address, std::move(d));
    }
  }
  if (damaged.empty()) return report;

  std::vector<EncodedChunk> chunks;
  for (auto& [address, d] : damaged) {
    std::string raw(d.raw_length, '\0');
    Status s = source(address, d.raw_length, MutableBytes(raw));
    // A lossless copy must hash to the address it stands for.
    if (s.ok() && !d.cast && ContentHash(ConstBytes(raw)) != address) {
      s = Status::DataLoss("the copy does not match the address");
    }
    if (!s.ok()) {
      d.bad.status = Status::DataLoss(d.bad.status.ToString() +
                                      "; no intact copy: " + s.ToString());
      report.unrepaired.push_back(std::move(d.bad));
      continue;
    }
    EncodeOptions eo = options_.codec;
    eo.cast_to_bf16 = d.cast;
    EncodedChunk e;
    e.address = address;
    HY_RETURN_IF_ERROR(EncodeChunk(eo, d.dtype, ConstBytes(raw), {}, &e.value)
                           .WithContext("encoding chunk " + address.ToHex()));
    chunks.push_back(std::move(e));
  }
  if (chunks.empty()) return report;

  std::shared_lock<std::shared_mutex> gc(gc_mu_);  // No Gc in between.
  uint64_t epoch = 0;
  HY_RETURN_IF_ERROR(WriteEpoch(&chunks, &epoch));
  rocksdb::WriteBatch batch;
  for (const EncodedChunk& e : chunks) {
    HY_ASSIGN_OR_RETURN(ChunkHeader h, ParseChunkHeader(e.value));
    const keys::ChunkLocation loc{epoch, e.value.size(), 0, Hash128{},
                                  EncodingName(h)};
    batch.Put(meta_, keys::ChunkIndex(e.address), keys::EncodeLocation(loc));
  }
  std::string value;
  HY_RETURN_IF_ERROR(Get(meta_, keys::Epoch(epoch), &value));
  keys::EpochRecord record;
  keys::DecodeEpoch(value, &record);
  record.sealed = true;
  batch.Put(meta_, keys::Epoch(epoch), keys::EncodeEpoch(record));
  HY_RETURN_IF_ERROR(WriteSynced(&batch, "recording repaired chunks"));
  for (const EncodedChunk& e : chunks) {
    MarkVerified(e.address);
    report.repaired.push_back(e.address);
  }
  return report;
}

}  // namespace hy::statestore
