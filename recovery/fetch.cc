// Recovery::Fetch: each rank's needs, filled from the shards the serving
// ranks read, exchanged in rounds of bounded size (see recovery.h).

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "recovery_impl.h"
#include "wire_util.h"

namespace hy::recovery {

namespace {

using internal::Clock;
using internal::Since;
using statestore::Store;

// One old rank's shard of one tensor, as the serving rank reads it.
struct Served {
  int old_rank = 0;
  Store* store = nullptr;
  uint64_t version = 0;
  std::vector<FlatRun> runs;
  uint64_t element_size = 4;
};

// Elements of one tensor this rank reads and sends to another rank.
struct Outgoing {
  int dest = 0;
  uint64_t need = 0;  // Index into the destination's needs.
  std::string name;
  const Served* served = nullptr;
  FlatRun part;  // Global element offsets.

  uint64_t bytes() const { return part.length * served->element_size; }
};

// Appends `o` to `out`, read from its shard straight into the message.
// Returns the store's errors.
Status ReadOutgoing(const Outgoing& o, std::vector<uint8_t>* out) {
  const uint64_t bytes = o.bytes();
  internal::PutBytes(out, o.name.data(), o.name.size());
  internal::PutU64(out, o.need);
  internal::PutU64(out, static_cast<uint64_t>(o.part.offset));
  internal::PutU64(out, bytes);
  const size_t at = out->size();
  out->resize(at + bytes);
  return o.served->store
      ->ReadRegion(o.served->version, o.name, o.part,
                   MutableBytes(out->data() + at, bytes))
      .WithContext("reading '" + o.name + "' of old rank " +
                   std::to_string(o.served->old_rank));
}

// Copies the pieces in `message` from rank `from` into their needs.
// Returns DataLoss for a garbled message or a piece outside its need.
Status TakeIncoming(const std::vector<uint8_t>& message, int from,
                    const std::vector<TensorNeed>& needs,
                    std::vector<int64_t>* covered, RecoveryStats* stats) {
  internal::Reader in(message);
  while (!in.done()) {
    std::string name;
    uint64_t index = 0, offset = 0;
    ConstBytes data;
    if (!in.String(&name) || !in.U64(&index) || !in.U64(&offset) ||
        !in.Bytes(&data) || index >= needs.size() ||
        needs[index].name != name) {
      return Status::DataLoss("recovery message from rank " +
                              std::to_string(from) + " is garbled");
    }
    const TensorNeed& n = needs[index];
    const uint64_t es = n.out.size() / n.region.length;
    const int64_t off = static_cast<int64_t>(offset);
    if (data.size() % es != 0 || off < n.region.offset ||
        off + static_cast<int64_t>(data.size() / es) > n.region.end()) {
      return Status::DataLoss("recovery piece of '" + name +
                              "' falls outside the need");
    }
    std::memcpy(n.out.data() + (off - n.region.offset) * es, data.data(),
                data.size());
    (*covered)[index] += static_cast<int64_t>(data.size() / es);
    stats->received_bytes += data.size();
  }
  return Status::OK();
}

}  // namespace

Status Recovery::Fetch(const std::vector<TensorNeed>& needs) {
  Impl& m = *impl_;
  if (!m.has_state) return Status::FailedPrecondition("nothing to recover");
  reshard::Transport* t = m.transport;
  const int world = t->world_size();
  const int me = m.rank();
  // 1. Everyone's needs.
  nlohmann::json mine = nlohmann::json::array();
  for (const TensorNeed& n : needs) {
    if (n.region.length <= 0 || n.region.offset < 0 ||
        n.out.size() % static_cast<uint64_t>(n.region.length) != 0) {
      return Status::InvalidArgument("recovery need for '" + n.name +
                                     "' is malformed");
    }
    mine.push_back({n.name, n.region.offset, n.region.length});
  }
  HY_ASSIGN_OR_RETURN(std::vector<std::string> all_needs,
                      internal::GatherStrings(t, mine.dump()));
  // 2. The shards this rank serves, by tensor.
  const auto read_start = Clock::now();
  Status error;
  std::map<std::string, std::vector<Served>> served;
  for (int r = 0; r < m.choice.commit.world_size && error.ok(); ++r) {
    if (m.server[r] != me) continue;
    const CopyEntry& c = m.choice.source[r];
    auto store = m.StoreAt(c.where.path);
    if (!store.ok()) {
      error = store.status();
      break;
    }
    auto manifest = (*store)->ReadManifest(c.version);
    if (!manifest.ok()) {
      error = manifest.status().WithContext(c.where.path);
      break;
    }
    for (const auto& [name, entry] : manifest->tensors) {
      for (const statestore::ShardEntry& s : entry.shards) {
        if (s.rank != r) continue;
        auto runs = s.geometry.ToFlatRuns(entry.meta.shape);
        if (!runs.ok()) {
          error = Status::DataLoss(runs.status().message());
          break;
        }
        served[name].push_back({r, *store, c.version, std::move(*runs),
                                DTypeSize(entry.meta.dtype)});
      }
    }
  }
  // 3. This rank's own needs from the shards served here are read in place;
  // the others' are cut into pieces of at most fetch_bytes and grouped into
  // rounds of at most fetch_bytes.
  const uint64_t budget = std::max<uint64_t>(1, m.options.fetch_bytes);
  std::vector<Outgoing> outgoing;
  std::vector<int64_t> covered(needs.size(), 0);
  for (int d = 0; d < world && error.ok(); ++d) {
    nlohmann::json list = nlohmann::json::parse(all_needs[d], nullptr, false);
    if (!list.is_array()) {
      error = Status::DataLoss("need list garbled");
      break;
    }
    for (size_t i = 0; i < list.size() && error.ok(); ++i) {
      const std::string name = list[i][0].get<std::string>();
      const FlatRun region{list[i][1].get<int64_t>(),
                           list[i][2].get<int64_t>()};
      auto it = served.find(name);
      if (it == served.end()) continue;
      for (const Served& s : it->second) {
        for (const RunOverlap& o : IntersectRuns(s.runs, region)) {
          if (d != me) {
            const int64_t most = static_cast<int64_t>(
                std::max<uint64_t>(1, budget / s.element_size));
            for (int64_t at = 0; at < o.length; at += most) {
              outgoing.push_back(
                  {d,
                   i,
                   name,
                   &s,
                   {o.global_offset + at, std::min(most, o.length - at)}});
            }
            continue;
          }
          const TensorNeed& n = needs[i];
          const uint64_t es = n.out.size() / n.region.length;
          const FlatRun part{o.global_offset, o.length};
          error =
              s.store
                  ->ReadRegion(s.version, name, part,
                               n.out.subspan((part.offset - region.offset) * es,
                                             part.length * es))
                  .WithContext("reading '" + name + "' of old rank " +
                               std::to_string(s.old_rank));
          if (!error.ok()) break;
          covered[i] += part.length;
          m.stats.local_bytes += part.length * es;
        }
        if (!error.ok()) break;
      }
    }
  }
  std::vector<uint64_t> sizes;
  for (const Outgoing& o : outgoing) {
    sizes.push_back(o.bytes());
  }
  std::vector<size_t> round_starts = internal::BatchStarts(sizes, budget);
  round_starts.push_back(outgoing.size());
  m.stats.read_seconds += Since(read_start);
  // 4. As many rounds as the rank with the most takes. A rank with an error
  // still takes part in every round (sending nothing), so none is left
  // waiting; then all agree on the outcome.
  const uint64_t my_rounds = round_starts.size() - 1;
  HY_ASSIGN_OR_RETURN(const uint64_t rounds,
                      internal::MaxOverRanks(t, my_rounds));
  std::vector<std::vector<uint8_t>> send(world), recv;
  for (uint64_t round = 0; round < rounds; ++round) {
    const auto round_read = Clock::now();
    for (auto& s : send) s.clear();
    uint64_t round_bytes = 0;
    const size_t begin = round < my_rounds ? round_starts[round] : 0;
    const size_t end = round < my_rounds ? round_starts[round + 1] : 0;
    for (size_t k = begin; k < end && error.ok(); ++k) {
      const Outgoing& o = outgoing[k];
      error = ReadOutgoing(o, &send[o.dest]);
      round_bytes += o.bytes();
    }
    if (!error.ok()) {
      for (auto& s : send) s.clear();
    } else {
      m.stats.sent_bytes += round_bytes;
      m.stats.largest_round_bytes =
          std::max(m.stats.largest_round_bytes, round_bytes);
    }
    m.stats.read_seconds += Since(round_read);
    const auto exchange_start = Clock::now();
    std::vector<ConstBytes> views;
    for (const auto& s : send) views.emplace_back(s);
    HY_RETURN_IF_ERROR(t->AllToAllV(views, &recv));
    for (int p = 0; p < world && error.ok(); ++p) {
      error = TakeIncoming(recv[p], p, needs, &covered, &m.stats);
    }
    m.stats.exchange_seconds += Since(exchange_start);
  }
  m.stats.fetch_rounds += static_cast<int>(rounds);
  send.clear();
  recv.clear();
  for (size_t i = 0; i < needs.size() && error.ok(); ++i) {
    // Shards of one version are disjoint or equal (replicated), so full
    // coverage is at least the region's length.
    if (covered[i] < needs[i].region.length) {
      error = Status::DataLoss(
          "tensor '" + needs[i].name +
          "': " + std::to_string(needs[i].region.length - covered[i]) + " of " +
          std::to_string(needs[i].region.length) +
          " needed elements are held by no surviving copy");
    }
  }
  return internal::AgreeOnStatus(t, error);
}

}  // namespace hy::recovery
