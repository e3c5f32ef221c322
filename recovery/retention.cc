// Retention across a run's stores (see hy/recovery/retention.h).

#include "hy/recovery/retention.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <utility>

namespace hy::recovery {

namespace fs = std::filesystem;

bool RetentionPolicy::Superseded(uint64_t version) const {
  return safe_version != 0 && pinned.count(version) == 0 &&
         VersionGeneration(version) != live_generation &&
         VersionStep(version) <= VersionStep(safe_version);
}

statestore::GcOptions GcOptionsFor(const RetentionPolicy& policy) {
  statestore::GcOptions o;
  o.keep_last = policy.keep_last;
  o.pinned = policy.pinned;
  const uint32_t live = policy.live_generation;
  o.counted = [live](uint64_t v) { return VersionGeneration(v) == live; };
  o.drop = [policy](uint64_t v) { return policy.Superseded(v); };
  return o;
}

namespace {

std::string JoinRanks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

}  // namespace

Result<RootRetention> PlanRootRetention(
    const Catalog& catalog, const std::vector<int>& nodes, size_t keep_last,
    int replicas, const std::set<uint64_t>& pinned_steps) {
  // Committed copies per (version, old rank), counted once per store.
  std::map<uint64_t, std::map<int, std::set<std::string>>> copies;
  std::set<uint64_t> committed;
  for (const CopyEntry& e : catalog.entries()) {
    if (e.state != CopyState::kCommitted) continue;
    committed.insert(e.version);
    for (int r : e.ranks) copies[e.version][r].insert(e.where.path);
  }
  if (committed.empty()) {
    return Status::NotFound("no store committed any version");
  }
  RootRetention out;
  out.policy.keep_last = keep_last;
  uint32_t live = 0;
  for (uint64_t v : committed) live = std::max(live, VersionGeneration(v));
  out.policy.live_generation = live;
  if (replicas < 0) {
    // As many as the best-copied part has, or as many replica stores as
    // any source has (a lost node takes copies with it, not the others).
    size_t most = 1;
    for (const auto& [v, ranks] : copies) {
      for (const auto& [r, where] : ranks) most = std::max(most, where.size());
    }
    std::map<std::pair<int, int>, std::set<std::string>> holders;
    for (const CopyEntry& e : catalog.entries()) {
      if (e.where.replica) {
        holders[{e.where.source_node, e.where.slot}].insert(e.where.path);
      }
    }
    for (const auto& [source, paths] : holders) {
      most = std::max(most, paths.size() + 1);
    }
    replicas = static_cast<int>(most) - 1;
  }
  out.replicas = replicas;
  // The live generation's newest safe version.
  for (auto it = committed.rbegin(); it != committed.rend(); ++it) {
    const uint64_t v = *it;
    if (VersionGeneration(v) != live) continue;
    if (out.newest_live == 0) out.newest_live = v;
    const statestore::CommitRecord* commit = catalog.FindCommit(v);
    const int world = commit != nullptr ? commit->world_size : 1;
    const size_t want =
        1 + static_cast<size_t>(std::min(replicas, std::max(0, world - 1)));
    std::vector<int> short_ranks;
    for (int r = 0; r < world; ++r) {
      if (copies[v][r].size() < want) short_ranks.push_back(r);
    }
    if (short_ranks.empty()) {
      out.policy.safe_version = v;
      break;
    }
    if (out.why_unsafe.empty()) {
      out.why_unsafe = "step " + std::to_string(VersionStep(v)) +
                       " of generation " + std::to_string(live) +
                       " has fewer than " + std::to_string(want) +
                       " committed copies of rank(s) " + JoinRanks(short_ranks);
    }
  }
  Result<Choice> newest = ChooseVersion(catalog, nodes, {});
  if (newest.ok()) out.policy.pinned.insert(newest->version);
  for (uint64_t step : pinned_steps) {
    bool found = false;
    for (uint64_t v : committed) {
      if (VersionStep(v) != step) continue;
      out.policy.pinned.insert(v);
      found = true;
    }
    if (!found) {
      return Status::NotFound("no store holds a committed step " +
                              std::to_string(step) + " to pin");
    }
  }
  return out;
}

Status ApplyRetention(const std::vector<StoreLocation>& stores,
                      const RetentionPolicy& policy, const std::string& run_id,
                      std::vector<StoreRetention>* done) {
  for (const StoreLocation& where : stores) {
    StoreRetention r;
    r.where = where;
    {
      statestore::StoreOptions o;
      o.create_if_missing = false;
      o.threads = 2;
      o.run_id = run_id;
      Result<std::unique_ptr<statestore::Store>> store =
          statestore::Store::Open(where.path, o);
      if (!store.ok()) return store.status().WithContext(where.path);
      Result<statestore::GcReport> gc = (*store)->Gc(GcOptionsFor(policy));
      if (!gc.ok()) return gc.status().WithContext(where.path);
      r.report = *gc;
      Result<std::vector<statestore::VersionInfo>> left =
          (*store)->ListVersions();
      if (!left.ok()) return left.status().WithContext(where.path);
      r.removed = std::all_of(left->begin(), left->end(),
                              [](const statestore::VersionInfo& v) {
                                return !v.committed && v.prepared.empty();
                              });
    }  // Closed before its directory goes.
    if (r.removed) {
      std::error_code ec;
      fs::remove_all(where.path, ec);
      if (ec) {
        return Status::IOError("removing " + where.path + ": " + ec.message());
      }
    }
    if (done != nullptr) done->push_back(std::move(r));
  }
  return Status::OK();
}

Result<std::vector<int>> RemoveEmptyNodes(const std::string& root,
                                          const std::vector<int>& live_nodes) {
  HY_ASSIGN_OR_RETURN(std::vector<int> nodes, ListNodes(root));
  std::vector<int> removed;
  for (int n : nodes) {
    if (std::count(live_nodes.begin(), live_nodes.end(), n) > 0) continue;
    HY_ASSIGN_OR_RETURN(std::vector<StoreLocation> stores,
                        ListNodeStores(root, n));
    if (!stores.empty()) continue;
    std::error_code ec;
    fs::remove_all(NodeDir(root, n), ec);
    if (ec) {
      return Status::IOError("removing " + NodeDir(root, n) + ": " +
                             ec.message());
    }
    removed.push_back(n);
  }
  return removed;
}

Result<std::vector<StoreLocation>> StaleNodeStores(
    const std::string& root, int node, const std::vector<int>& nodes,
    int replicas) {
  std::set<std::string> written;
  for (int rank : RanksOnNode(node, nodes)) {
    written.insert(PrimaryStorePath(root, node, SlotOf(rank, nodes)));
    for (int src : ReplicaSourceRanks(rank, nodes, replicas)) {
      written.insert(
          ReplicaStorePath(root, node, nodes[src], SlotOf(src, nodes)));
    }
  }
  HY_ASSIGN_OR_RETURN(std::vector<StoreLocation> stores,
                      ListNodeStores(root, node));
  std::vector<StoreLocation> out;
  for (StoreLocation& s : stores) {
    if (written.count(s.path) == 0) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace hy::recovery
