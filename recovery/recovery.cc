// Recovery: scan, settle, choose, verify (see hy/recovery/recovery.h; Fetch
// is in fetch.cc).

#include "hy/recovery/recovery.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "hy/statestore/store.h"
#include "recovery_impl.h"
#include "wire_util.h"

namespace hy::recovery {

namespace internal {

Result<std::vector<std::string>> GatherStrings(reshard::Transport* t,
                                               const std::string& mine) {
  std::vector<std::vector<uint8_t>> all;
  HY_RETURN_IF_ERROR(t->AllGatherV(ConstBytes(mine), &all));
  std::vector<std::string> out;
  for (const auto& v : all) out.emplace_back(v.begin(), v.end());
  return out;
}

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

}  // namespace internal

namespace {

using internal::AgreeOnStatus;
using internal::Clock;
using internal::GatherStrings;
using internal::Since;
using statestore::Store;

Result<std::unique_ptr<Store>> OpenStore(const std::string& path,
                                         bool read_only) {
  statestore::StoreOptions o;
  o.read_only = read_only;
  o.create_if_missing = false;
  o.threads = 4;
  return Store::Open(path, o);
}

}  // namespace

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
    statestore::StoreOptions o;
    o.read_only = true;
    o.create_if_missing = false;
    o.threads = 4;
    o.metrics = options.metrics;
    if (options.log) {
      o.on_damaged_chunk = [log = options.log](const std::string& store,
                                               const Hash128& address,
                                               const Status& why) {
        log("store " + store + ": chunk " + address.ToHex() + " is damaged (" +
            why.ToString() + ")");
      };
    }
    HY_ASSIGN_OR_RETURN(std::unique_ptr<Store> s, Store::Open(path, o));
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

}  // namespace hy::recovery
