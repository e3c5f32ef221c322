// Recovery: scan, settle, choose, verify, fetch (see hy/recovery/recovery.h).

#include "hy/recovery/recovery.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "hy/statestore/store.h"
#include "wire_util.h"

namespace hy::recovery {

namespace {

using Clock = std::chrono::steady_clock;
using statestore::Store;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& path,
                                         bool read_only) {
  statestore::StoreOptions o;
  o.read_only = read_only;
  o.create_if_missing = false;
  o.threads = 4;
  return Store::Open(path, o);
}

// Every rank's `mine`; a failure on any rank is returned on all.
Result<std::vector<std::string>> GatherStrings(reshard::Transport* t,
                                               const std::string& mine) {
  std::vector<std::vector<uint8_t>> all;
  HY_RETURN_IF_ERROR(t->AllGatherV(ConstBytes(mine), &all));
  std::vector<std::string> out;
  for (const auto& v : all) out.emplace_back(v.begin(), v.end());
  return out;
}

// Agrees on an outcome: OK on every rank only if OK on every rank.
Status AgreeOnStatus(reshard::Transport* t, const Status& mine) {
  const std::string text = mine.ok() ? std::string() : mine.ToString();
  HY_ASSIGN_OR_RETURN(std::vector<std::string> all, GatherStrings(t, text));
  if (!mine.ok()) return mine;
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty()) {
      return Status::DataLoss("rank " + std::to_string(r) + ": " + all[r]);
    }
  }
  return Status::OK();
}

}  // namespace

struct Recovery::Impl {
  reshard::Transport* transport = nullptr;
  RecoveryOptions options;
  Catalog local;
  Catalog global;
  bool has_state = false;
  Choice choice;
  std::vector<int> server;  // Index: old rank; the new rank serving it.
  RecoveryStats stats;
  std::map<std::string, std::unique_ptr<Store>> open;  // By path.

  int rank() const { return transport->rank(); }
  void Log(const std::string& line) const {
    if (options.log) options.log(line);
  }
  Status Scan();
  Status Settle();
  Status ChooseAndVerify();
  Result<Store*> StoreAt(const std::string& path);
};

Recovery::Recovery(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Recovery::~Recovery() = default;

bool Recovery::has_state() const { return impl_->has_state; }
uint32_t Recovery::next_generation() const {
  return impl_->global.NextGeneration();
}
const Choice& Recovery::choice() const { return impl_->choice; }
const RecoveryStats& Recovery::stats() const { return impl_->stats; }

Result<std::unique_ptr<Recovery>> Recovery::Open(
    reshard::Transport* transport, const RecoveryOptions& options) {
  if (static_cast<int>(options.nodes.size()) != transport->world_size()) {
    return Status::InvalidArgument(
        "recovery: " + std::to_string(options.nodes.size()) +
        " node ids for a world of " + std::to_string(transport->world_size()));
  }
  auto impl = std::make_unique<Impl>();
  impl->transport = transport;
  impl->options = options;
  const auto start = Clock::now();
  HY_RETURN_IF_ERROR(impl->Scan());
  HY_RETURN_IF_ERROR(impl->Settle());
  impl->stats.scan_seconds = Since(start);
  const auto verify_start = Clock::now();
  HY_RETURN_IF_ERROR(impl->ChooseAndVerify());
  impl->stats.verify_seconds = Since(verify_start);
  return std::unique_ptr<Recovery>(new Recovery(std::move(impl)));
}

Status Recovery::Impl::Scan() {
  const int me = options.nodes[rank()];
  Status local_error;
  std::vector<StoreLocation> stores;
  // One rank per node (slot 0) scans and settles the node's stores.
  if (SlotOf(rank(), options.nodes) == 0) {
    auto mine = ListNodeStores(options.root, me);
    if (mine.ok()) {
      stores = std::move(mine).value();
    } else {
      local_error = mine.status();
    }
  }
  if (rank() == 0 && local_error.ok()) {
    // Directories of nodes no rank runs on: readable here only if the root
    // is shared; a lost machine's directory is gone.
    auto all = ListNodes(options.root);
    if (!all.ok()) local_error = all.status();
    for (int n : all.ok() ? *all : std::vector<int>()) {
      if (std::count(options.nodes.begin(), options.nodes.end(), n)) continue;
      auto orphans = ListNodeStores(options.root, n);
      if (!orphans.ok()) {
        local_error = orphans.status();
        break;
      }
      stores.insert(stores.end(), orphans->begin(), orphans->end());
    }
  }
  if (local_error.ok()) {
    auto scanned = Catalog::Scan(stores);
    if (scanned.ok()) {
      local = std::move(scanned).value();
    } else {
      local_error = scanned.status();
    }
  }
  HY_RETURN_IF_ERROR(AgreeOnStatus(transport, local_error));
  HY_ASSIGN_OR_RETURN(std::vector<std::string> all,
                      GatherStrings(transport, local.Encode()));
  for (const std::string& text : all) {
    HY_ASSIGN_OR_RETURN(Catalog c, Catalog::Decode(text));
    global.Merge(c);
  }
  for (const std::string& u : local.unreadable()) {
    Log("store unreadable, left out: " + u);
  }
  return Status::OK();
}

Status Recovery::Impl::Settle() {
  Status error;
  for (const CopyEntry& e : local.entries()) {
    if (e.state != CopyState::kPrepared || !error.ok()) continue;
    auto store = OpenStore(e.where.path, /*read_only=*/false);
    if (!store.ok()) {
      error = store.status().WithContext("settling " + e.where.path);
      continue;
    }
    const statestore::CommitRecord* c = global.FindCommit(e.version);
    Status s;
    if (c != nullptr) {
      statestore::CommitRecord mine = *c;
      mine.ranks = e.ranks;
      s = (*store)->Commit(mine);
      if (s.code() == StatusCode::kAlreadyExists) s = Status::OK();
      ++stats.settled_commits;
      Log("settled: committed version " + std::to_string(e.version) + " in " +
          e.where.path +
          " (its part was prepared; another store "
          "holds the commit decision)");
    } else {
      s = (*store)->Abort(e.version);
      ++stats.settled_aborts;
      Log("settled: aborted undecided version " + std::to_string(e.version) +
          " in " + e.where.path);
    }
    if (!s.ok()) error = s.WithContext("settling " + e.where.path);
  }
  return AgreeOnStatus(transport, error);
}

Status Recovery::Impl::ChooseAndVerify() {
  std::set<std::string> bad;
  std::set<std::string> verified;  // CopyKeys found good.
  for (;;) {
    Result<Choice> chosen =
        ChooseVersion(global, options.nodes, bad, options.step);
    if (!chosen.ok()) {
      if (chosen.status().IsNotFound() && options.step < 0) return Status::OK();
      return chosen.status();
    }
    choice = std::move(chosen).value();
    const int old_world = choice.commit.world_size;
    // The ranks of the node holding each chosen copy take turns serving
    // them; copies on no live node are rank 0's (a shared directory).
    server.assign(old_world, 0);
    std::map<int, int> turn;  // Node -> copies given out so far.
    for (int r = 0; r < old_world; ++r) {
      const int node = choice.source[r].where.node;
      const std::vector<int> ranks = RanksOnNode(node, options.nodes);
      if (!ranks.empty()) server[r] = ranks[turn[node]++ % ranks.size()];
    }
    // Verify the copies this rank serves (each store once).
    std::vector<std::string> found_bad;
    std::set<std::string> done_paths;
    for (int r = 0; r < old_world; ++r) {
      const CopyEntry& c = choice.source[r];
      if (server[r] != rank() || verified.count(CopyKey(c, r)) > 0 ||
          !done_paths.insert(c.where.path).second) {
        continue;
      }
      auto store = StoreAt(c.where.path);
      Result<statestore::VerifyReport> report =
          store.ok() ? (*store)->Verify(c.version)
                     : Result<statestore::VerifyReport>(store.status());
      std::set<int> bad_ranks;
      if (!report.ok()) {
        bad_ranks.insert(c.ranks.begin(), c.ranks.end());
        Log("copy " + c.where.path + " of version " +
            std::to_string(c.version) +
            " unusable: " + report.status().ToString());
      } else {
        for (const statestore::BadChunk& b : report->bad) {
          bad_ranks.insert(b.rank);
          Log("bad chunk in " + c.where.path + ": tensor '" + b.tensor +
              "' rank " + std::to_string(b.rank) + " chunk " +
              std::to_string(b.index) + ": " + b.status.ToString());
        }
      }
      for (int rr : c.ranks) {
        if (bad_ranks.count(rr)) {
          found_bad.push_back(CopyKey(c, rr));
        } else {
          verified.insert(CopyKey(c, rr));
        }
      }
    }
    nlohmann::json j = found_bad;
    HY_ASSIGN_OR_RETURN(std::vector<std::string> all,
                        GatherStrings(transport, j.dump()));
    size_t added = 0;
    for (const std::string& text : all) {
      nlohmann::json keys = nlohmann::json::parse(text, nullptr, false);
      if (!keys.is_array()) return Status::DataLoss("bad-copy list garbled");
      for (const auto& k : keys) {
        added += bad.insert(k.get<std::string>()).second ? 1 : 0;
      }
    }
    if (added == 0) break;
    Log("retrying the choice without " + std::to_string(added) + " bad cop" +
        (added == 1 ? "y" : "ies"));
  }
  has_state = true;
  for (const std::string& n : choice.notes) Log(n);
  return Status::OK();
}

Result<Store*> Recovery::Impl::StoreAt(const std::string& path) {
  auto it = open.find(path);
  if (it == open.end()) {
    HY_ASSIGN_OR_RETURN(std::unique_ptr<Store> s,
                        OpenStore(path, /*read_only=*/true));
    it = open.emplace(path, std::move(s)).first;
  }
  return it->second.get();
}

Result<std::string> Recovery::FetchBlob(const std::string& name) {
  Impl& m = *impl_;
  if (!m.has_state) return Status::FailedPrecondition("nothing to recover");
  const int server = m.server[0];
  std::string mine;
  if (m.rank() == server) {
    const CopyEntry& c = m.choice.source[0];
    auto store = m.StoreAt(c.where.path);
    Result<std::string> blob = store.ok() ? (*store)->ReadBlob(c.version, name)
                                          : Result<std::string>(store.status());
    mine = blob.ok() ? "+" + *blob : "-" + blob.status().ToString();
    if (!blob.ok() && blob.status().IsNotFound()) mine = "?" + name;
  }
  HY_ASSIGN_OR_RETURN(std::vector<std::string> all,
                      GatherStrings(m.transport, mine));
  const std::string& got = all[server];
  if (got.empty()) return Status::Internal("blob server sent nothing");
  if (got[0] == '+') return got.substr(1);
  if (got[0] == '?') return Status::NotFound("no blob '" + name + "'");
  return Status::DataLoss("blob '" + name + "': " + got.substr(1));
}
namespace {

// One old rank's shard of one tensor, as the serving rank reads it.
struct Served {
  int old_rank = 0;
  Store* store = nullptr;
  uint64_t version = 0;
  std::vector<FlatRun> runs;
  uint64_t element_size = 4;
};

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
                      GatherStrings(t, mine.dump()));
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
  // 3. Read what each rank needs from the shards served here.
  std::vector<std::vector<uint8_t>> send(world);
  std::vector<int64_t> covered(needs.size(), 0);
  std::vector<uint8_t> piece;
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
          const FlatRun part{o.global_offset, o.length};
          if (d == me) {
            const TensorNeed& n = needs[i];
            const uint64_t es = n.out.size() / n.region.length;
            error = s.store->ReadRegion(
                s.version, name, part,
                n.out.subspan((part.offset - region.offset) * es,
                              part.length * es));
            covered[i] += part.length;
            m.stats.local_bytes += part.length * es;
          } else {
            const uint64_t es = s.element_size;
            piece.resize(part.length * es);
            error =
                s.store->ReadRegion(s.version, name, part, MutableBytes(piece));
            internal::PutBytes(&send[d], name.data(), name.size());
            internal::PutU64(&send[d], static_cast<uint64_t>(i));
            internal::PutU64(&send[d], static_cast<uint64_t>(part.offset));
            internal::PutBytes(&send[d], piece.data(), piece.size());
            m.stats.sent_bytes += piece.size();
          }
          if (!error.ok()) {
            error = error.WithContext("reading '" + name + "' of old rank " +
                                      std::to_string(s.old_rank));
            break;
          }
        }
      }
    }
  }
  m.stats.read_seconds += Since(read_start);
  // 4. Exchange (always: a rank with an error must not leave the others
  // waiting), then agree on the outcome.
  const auto exchange_start = Clock::now();
  if (!error.ok()) {
    for (auto& s : send) s.clear();
  }
  std::vector<ConstBytes> views;
  for (const auto& s : send) views.emplace_back(s);
  std::vector<std::vector<uint8_t>> recv;
  HY_RETURN_IF_ERROR(t->AllToAllV(views, &recv));
  send.clear();
  for (int p = 0; p < world && error.ok(); ++p) {
    internal::Reader in(recv[p]);
    while (!in.done()) {
      std::string name;
      uint64_t index = 0, offset = 0;
      ConstBytes data;
      if (!in.String(&name) || !in.U64(&index) || !in.U64(&offset) ||
          !in.Bytes(&data) || index >= needs.size() ||
          needs[index].name != name) {
        error = Status::DataLoss("recovery message from rank " +
                                 std::to_string(p) + " is garbled");
        break;
      }
      const TensorNeed& n = needs[index];
      const uint64_t es = n.out.size() / n.region.length;
      const int64_t off = static_cast<int64_t>(offset);
      if (data.size() % es != 0 || off < n.region.offset ||
          off + static_cast<int64_t>(data.size() / es) > n.region.end()) {
        error = Status::DataLoss("recovery piece of '" + name +
                                 "' falls outside the need");
        break;
      }
      std::memcpy(n.out.data() + (off - n.region.offset) * es, data.data(),
                  data.size());
      covered[index] += static_cast<int64_t>(data.size() / es);
      m.stats.received_bytes += data.size();
    }
  }
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
  m.stats.exchange_seconds += Since(exchange_start);
  return AgreeOnStatus(t, error);
}

}  // namespace hy::recovery
