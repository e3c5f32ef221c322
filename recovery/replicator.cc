// Replicator (see hy/recovery/replicator.h).

#include "hy/recovery/replicator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "hy/common/crash_point.h"
#include "hy/recovery/node_layout.h"
#include "hy/statestore/manifest.h"
#include "hy/statestore/store.h"
#include "replica_stream.h"
#include "wire_util.h"

namespace hy::recovery {

using statestore::Store;

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
  o.on_damaged_chunk = options_.on_damaged_chunk;
  o.metrics = options_.metrics;
  // The encoded batches a copy is ingested through stay within the
  // stream's bound too (the default would hold two of 256 MB).
  o.ingest_batch_bytes = std::min(o.ingest_batch_bytes,
                                  std::max<uint64_t>(1, options_.piece_bytes));
  HY_ASSIGN_OR_RETURN(std::unique_ptr<Store> s, Store::Open(path, o));
  return stores_.emplace(path, std::move(s)).first->second.get();
}

Status Replicator::StorePart(int source_rank, internal::PartReceiver* copy) {
  HY_RETURN_IF_ERROR(copy->Finish());
  const int me = transport_->rank();
  const int64_t step = static_cast<int64_t>(copy->commit().step);
  CrashPoint("replicate.prepared", me, step);
  HY_ASSIGN_OR_RETURN(Store * store, ReplicaStore(source_rank));
  Status s = store->Commit(copy->commit());
  if (s.code() == StatusCode::kAlreadyExists) s = Status::OK();
  HY_RETURN_IF_ERROR(s);
  CrashPoint("replicate.committed", me, step);
  // Versions of other generations stay until Retain, once every copy of
  // this one is durable.
  RetentionPolicy policy;
  policy.live_generation = VersionGeneration(copy->commit().version);
  policy.keep_last = static_cast<size_t>(options_.keep_last);
  store->Gc(GcOptionsFor(policy)).status().IgnoreError();  // Retried later.
  return Status::OK();
}

Status Replicator::Retain(const RetentionPolicy& policy) {
  Status first;
  for (auto& [path, store] : stores_) {
    Status s = store->Gc(GcOptionsFor(policy)).status().WithContext(path);
    if (first.ok()) first = s;
  }
  return first;
}

Status Replicator::Replicate(Store* own, uint64_t version, bool own_committed,
                             ReplicateStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  const int world = transport_->world_size();
  const int me = transport_->rank();
  ReplicateStats local;
  std::string error;
  auto note = [&](const std::string& what) {
    error += (error.empty() ? "" : "; ") + what;
  };
  // This rank's part as a stream of messages of at most message_bytes raw
  // (plus one record), and how many each rank sends: the ranks exchange as
  // many rounds as the longest stream takes.
  const uint64_t piece = std::max<uint64_t>(1, options_.piece_bytes);
  const uint64_t message_bytes = options_.message_bytes == 0
                                     ? piece
                                     : std::min(piece, options_.message_bytes);
  std::optional<internal::PartSender> sender;
  if (own_committed) {
    Result<internal::PartSender> opened =
        internal::PartSender::Open(own, version, message_bytes);
    if (opened.ok()) {
      sender = std::move(opened).value();
      local.raw_bytes = sender->raw_bytes();
    } else {
      note("rank " + std::to_string(me) + ": " + opened.status().ToString());
    }
  }
  HY_ASSIGN_OR_RETURN(
      const uint64_t rounds,
      internal::MaxOverRanks(transport_, sender ? sender->messages() : 0));
  local.rounds = rounds;
  const std::vector<int> holders =
      ReplicaHolderRanks(me, options_.nodes, options_.replicas);
  const std::vector<int> sources =
      ReplicaSourceRanks(me, options_.nodes, options_.replicas);
  std::map<int, internal::PartReceiver> copies;
  std::set<int> unopened;  // Sources whose replica store did not open.
  std::vector<uint8_t> message;
  std::vector<std::vector<uint8_t>> recv;
  for (uint64_t round = 0; round < rounds; ++round) {
    message.clear();
    if (sender) {
      Status s = sender->Next(&message);
      if (!s.ok()) {  // Keep taking part; the holders see it incomplete.
        note("rank " + std::to_string(me) + ": " + s.ToString());
        sender.reset();
        message.clear();
      }
    }
    std::vector<ConstBytes> send(world);
    for (int h : holders) {
      send[h] = ConstBytes(message);
      local.sent_bytes += message.size();
    }
    HY_RETURN_IF_ERROR(transport_->AllToAllV(send, &recv));
    for (int src : sources) {
      local.received_bytes += recv[src].size();
      if (recv[src].empty()) continue;
      // Each piece goes into the replica store as it arrives.
      auto it = copies.find(src);
      if (it == copies.end() && unopened.count(src) == 0) {
        Result<Store*> store = ReplicaStore(src);
        if (store.ok()) {
          it = copies.try_emplace(src, *store, piece).first;
        } else {
          note("copy of rank " + std::to_string(src) + " on rank " +
               std::to_string(me) + ": " + store.status().ToString());
          unopened.insert(src);
        }
      }
      if (it != copies.end()) {
        it->second.Add(recv[src], version).IgnoreError();  // complete() says.
      }
    }
  }
  message.clear();
  message.shrink_to_fit();
  for (int src : sources) {
    auto it = copies.find(src);
    if (it == copies.end()) continue;  // Its commit failed; it says so.
    Status s = it->second.complete() ? StorePart(src, &it->second)
                                     : it->second.status();
    if (!s.ok()) {
      note("copy of rank " + std::to_string(src) + " on rank " +
           std::to_string(me) + ": " + s.ToString());
    }
    copies.erase(it);  // An unfinished copy's writer goes (Gc drops it).
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
