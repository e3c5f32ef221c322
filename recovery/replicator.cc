// Replicator (see hy/recovery/replicator.h).

#include "hy/recovery/replicator.h"

#include <chrono>
#include <deque>

#include "hy/recovery/node_layout.h"
#include "hy/statestore/codec.h"
#include "hy/statestore/manifest.h"
#include "hy/statestore/store.h"
#include "wire_util.h"

namespace hy::recovery {

namespace {

using statestore::Store;

// Reads this rank's committed part of `version` and packs it:
//   commit record | rank manifest | per shard (manifest order): encoded
//   chunk | per blob: bytes.
Status PackPart(Store* own, uint64_t version, std::vector<uint8_t>* out,
                uint64_t* raw_bytes) {
  HY_ASSIGN_OR_RETURN(statestore::Manifest m, own->ReadManifest(version));
  statestore::RankManifest part;
  part.version = version;
  part.rank = m.commit.LocalRanks().empty() ? 0 : m.commit.LocalRanks()[0];
  for (const auto& [name, entry] : m.tensors) part.tensors.push_back(entry);
  part.blobs = m.blobs;
  const std::string commit = statestore::EncodeCommitRecord(m.commit);
  const std::string manifest = statestore::EncodeRankManifest(part);
  internal::PutBytes(out, commit.data(), commit.size());
  internal::PutBytes(out, manifest.data(), manifest.size());
  std::vector<uint8_t> raw;
  std::string encoded;
  statestore::EncodeOptions eo;
  for (const statestore::TensorEntry& t : part.tensors) {
    for (const statestore::ShardEntry& s : t.shards) {
      const int64_t n = s.geometry.NumElements();
      raw.resize(static_cast<size_t>(n) * DTypeSize(t.meta.dtype));
      HY_RETURN_IF_ERROR(
          own->ReadShard(version, t.meta.name, s.rank, MutableBytes(raw)));
      HY_RETURN_IF_ERROR(statestore::EncodeChunk(
          eo, t.meta.dtype, ConstBytes(raw), {}, &encoded));
      internal::PutBytes(out, encoded.data(), encoded.size());
      *raw_bytes += raw.size();
    }
  }
  for (const statestore::BlobEntry& b : part.blobs) {
    HY_ASSIGN_OR_RETURN(std::string data,
                        own->ReadBlob(version, b.name, b.rank));
    internal::PutBytes(out, data.data(), data.size());
  }
  return Status::OK();
}

}  // namespace

Replicator::Replicator(reshard::Transport* transport, ReplicatorOptions options)
    : transport_(transport), options_(std::move(options)) {}

Replicator::~Replicator() = default;

Result<Store*> Replicator::ReplicaStore(int source_rank) {
  const int source_node = options_.nodes[source_rank];
  const int source_slot = SlotOf(source_rank, options_.nodes);
  const std::string path =
      ReplicaStorePath(options_.root, options_.nodes[transport_->rank()],
                       source_node, source_slot);
  auto it = stores_.find(path);
  if (it != stores_.end()) return it->second.get();
  statestore::StoreOptions o;
  o.threads = 2;
  o.run_id = options_.run_id;
  HY_ASSIGN_OR_RETURN(std::unique_ptr<Store> s, Store::Open(path, o));
  return stores_.emplace(path, std::move(s)).first->second.get();
}

Status Replicator::StorePart(int source_rank,
                             const std::vector<uint8_t>& message,
                             uint64_t version) {
  internal::Reader in(message);
  std::string commit_text, manifest_text;
  if (!in.String(&commit_text) || !in.String(&manifest_text)) {
    return Status::DataLoss("replica message garbled");
  }
  HY_ASSIGN_OR_RETURN(statestore::CommitRecord commit,
                      statestore::DecodeCommitRecord(commit_text));
  HY_ASSIGN_OR_RETURN(statestore::RankManifest manifest,
                      statestore::DecodeRankManifest(manifest_text));
  if (commit.version != version || manifest.version != version) {
    return Status::DataLoss("replica message for another version");
  }
  statestore::SavePart part;
  part.version = version;
  part.rank = manifest.rank;
  std::deque<std::vector<uint8_t>> buffers;  // Stable addresses.
  std::vector<std::string> blob_data;
  for (const statestore::TensorEntry& t : manifest.tensors) {
    for (const statestore::ShardEntry& s : t.shards) {
      ConstBytes encoded;
      if (!in.Bytes(&encoded)) return Status::DataLoss("replica truncated");
      const int64_t n = s.geometry.NumElements();
      buffers.emplace_back(static_cast<size_t>(n) * DTypeSize(t.meta.dtype));
      HY_RETURN_IF_ERROR(
          statestore::DecodeChunk(encoded, {}, MutableBytes(buffers.back())));
      statestore::ShardData d;
      d.meta = t.meta;
      d.geometry = s.geometry;
      d.data = ConstBytes(buffers.back());
      part.shards.push_back(std::move(d));
    }
  }
  blob_data.reserve(manifest.blobs.size());
  for (const statestore::BlobEntry& b : manifest.blobs) {
    std::string data;
    if (!in.String(&data)) return Status::DataLoss("replica truncated");
    blob_data.push_back(std::move(data));
    part.blobs.push_back({b.name, b.rank, ConstBytes(blob_data.back())});
  }
  if (!in.done()) return Status::DataLoss("replica message too long");
  HY_ASSIGN_OR_RETURN(Store * store, ReplicaStore(source_rank));
  Status s = store->Save(part, nullptr);
  if (s.code() == StatusCode::kAlreadyExists) s = Status::OK();
  HY_RETURN_IF_ERROR(s);
  s = store->Commit(commit);
  if (s.code() == StatusCode::kAlreadyExists) s = Status::OK();
  HY_RETURN_IF_ERROR(s);
  statestore::GcOptions gc;
  gc.keep_last = static_cast<size_t>(options_.keep_last);
  store->Gc(gc).status().IgnoreError();  // The next commit retries it.
  return Status::OK();
}

Status Replicator::Replicate(Store* own, uint64_t version, bool own_committed,
                             ReplicateStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  const int world = transport_->world_size();
  const int me = transport_->rank();
  ReplicateStats local;
  std::string error;
  std::vector<uint8_t> message;
  if (own_committed) {
    Status s = PackPart(own, version, &message, &local.raw_bytes);
    if (!s.ok()) {
      error = "rank " + std::to_string(me) + ": " + s.ToString();
      message.clear();
    }
  }
  std::vector<ConstBytes> send(world);
  for (int h : ReplicaHolderRanks(me, options_.nodes, options_.replicas)) {
    send[h] = ConstBytes(message);
    local.sent_bytes += message.size();
  }
  std::vector<std::vector<uint8_t>> recv;
  HY_RETURN_IF_ERROR(transport_->AllToAllV(send, &recv));
  message.clear();
  for (int src : ReplicaSourceRanks(me, options_.nodes, options_.replicas)) {
    local.received_bytes += recv[src].size();
    if (recv[src].empty()) continue;  // Its commit failed; it says so.
    Status s = StorePart(src, recv[src], version);
    if (!s.ok()) {
      error += (error.empty() ? "" : "; ") + std::string("copy of rank ") +
               std::to_string(src) + " on rank " + std::to_string(me) + ": " +
               s.ToString();
    }
  }
  if (!own_committed && error.empty()) {
    error = "rank " + std::to_string(me) + " did not commit";
  }
  std::vector<std::vector<uint8_t>> outcomes;
  HY_RETURN_IF_ERROR(transport_->AllGatherV(ConstBytes(error), &outcomes));
  local.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (stats != nullptr) *stats = local;
  std::string all;
  for (const auto& o : outcomes) {
    if (o.empty()) continue;
    all += (all.empty() ? "" : "; ") + std::string(o.begin(), o.end());
  }
  if (!all.empty()) {
    return Status::Unavailable("version " + std::to_string(version) +
                               " not fully replicated: " + all);
  }
  return Status::OK();
}

}  // namespace hy::recovery
