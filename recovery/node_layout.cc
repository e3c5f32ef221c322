// Node directories, replica placement and version numbers (see
// hy/recovery/node_layout.h).

#include "hy/recovery/node_layout.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <system_error>

namespace hy::recovery {

namespace fs = std::filesystem;

namespace {

bool AllDigits(const std::string& s) {
  return !s.empty() && s.size() <= 9 &&
         std::all_of(s.begin(), s.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// The number after `prefix` in `name`, or -1 if `name` is not prefix<k>.
int IdAfter(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix)) {
    return -1;
  }
  const std::string digits = name.substr(prefix.size());
  return AllDigits(digits) ? std::atoi(digits.c_str()) : -1;
}

// "replica-<j>" -> (j, 0), "replica-<j>-<s>" -> (j, s); false otherwise.
bool ParseReplica(const std::string& name, int* source, int* slot) {
  const std::string prefix = "replica-";
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string rest = name.substr(prefix.size());
  const size_t dash = rest.find('-');
  const std::string node = rest.substr(0, dash);
  const std::string s = dash == std::string::npos ? "0" : rest.substr(dash + 1);
  if (!AllDigits(node) || !AllDigits(s)) return false;
  *source = std::atoi(node.c_str());
  *slot = std::atoi(s.c_str());
  return dash == std::string::npos || *slot > 0;
}

// "" for slot 0, "-<s>" otherwise.
std::string SlotSuffix(int slot) {
  return slot == 0 ? std::string() : "-" + std::to_string(slot);
}

}  // namespace

std::string NodeDir(const std::string& root, int node) {
  return root + "/node-" + std::to_string(node);
}

std::string PrimaryStorePath(const std::string& root, int node, int slot) {
  return NodeDir(root, node) + "/store" + SlotSuffix(slot);
}

std::string ReplicaStorePath(const std::string& root, int holder, int source,
                             int source_slot) {
  return NodeDir(root, holder) + "/replica-" + std::to_string(source) +
         SlotSuffix(source_slot);
}

std::string WorkerPidPath(const std::string& root, int node, int slot) {
  return NodeDir(root, node) + "/worker" + SlotSuffix(slot) + ".pid";
}

int SlotOf(int rank, const std::vector<int>& nodes) {
  return static_cast<int>(
      std::count(nodes.begin(), nodes.begin() + rank, nodes[rank]));
}

std::vector<int> RanksOnNode(int node, const std::vector<int>& nodes) {
  std::vector<int> out;
  for (size_t r = 0; r < nodes.size(); ++r) {
    if (nodes[r] == node) out.push_back(static_cast<int>(r));
  }
  return out;
}

int CountNodes(const std::vector<int>& nodes) {
  return static_cast<int>(std::set<int>(nodes.begin(), nodes.end()).size());
}

Result<std::vector<int>> ListNodes(const std::string& root) {
  std::error_code ec;
  std::vector<int> nodes;
  if (!fs::exists(root, ec)) return nodes;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    const int id = IdAfter(it->path().filename().string(), "node-");
    if (id >= 0 && it->is_directory(ec)) nodes.push_back(id);
  }
  if (ec) return Status::IOError("listing " + root + ": " + ec.message());
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

Result<std::vector<StoreLocation>> ListNodeStores(const std::string& root,
                                                  int node) {
  std::vector<StoreLocation> out;
  const std::string dir = NodeDir(root, node);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  std::vector<int> slots;
  std::vector<std::pair<int, int>> sources;  // (node, slot)
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!it->is_directory(ec)) continue;
    if (name == "store") slots.push_back(0);
    const int slot = IdAfter(name, "store-");
    if (slot > 0) slots.push_back(slot);
    int source = 0, source_slot = 0;
    if (ParseReplica(name, &source, &source_slot)) {
      sources.push_back({source, source_slot});
    }
  }
  if (ec) return Status::IOError("listing " + dir + ": " + ec.message());
  std::sort(slots.begin(), slots.end());
  for (int s : slots) {
    out.push_back({node, node, s, false, PrimaryStorePath(root, node, s)});
  }
  std::sort(sources.begin(), sources.end());
  for (const auto& [source, slot] : sources) {
    out.push_back(
        {node, source, slot, true, ReplicaStorePath(root, node, source, slot)});
  }
  return out;
}

Result<std::vector<StoreLocation>> ListRootStores(const std::string& root) {
  HY_ASSIGN_OR_RETURN(std::vector<int> nodes, ListNodes(root));
  std::vector<StoreLocation> out;
  for (int n : nodes) {
    HY_ASSIGN_OR_RETURN(std::vector<StoreLocation> found,
                        ListNodeStores(root, n));
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

std::vector<int> ReplicaHolderRanks(int rank, const std::vector<int>& nodes,
                                    int replicas) {
  const int world = static_cast<int>(nodes.size());
  // The nodes in ring order: by their lowest rank.
  std::vector<int> ring;
  for (int r = 0; r < world; ++r) {
    if (SlotOf(r, nodes) == 0) ring.push_back(nodes[r]);
  }
  const int me = static_cast<int>(
      std::find(ring.begin(), ring.end(), nodes[rank]) - ring.begin());
  const int slot = SlotOf(rank, nodes);
  std::vector<int> holders;
  // The next nodes, each on its rank of the same slot (mod its ranks).
  for (size_t i = 1;
       i < ring.size() && static_cast<int>(holders.size()) < replicas; ++i) {
    const std::vector<int> there =
        RanksOnNode(ring[(me + i) % ring.size()], nodes);
    holders.push_back(there[slot % there.size()]);
  }
  // Too few other nodes: other ranks, in ring order, on nodes already used.
  for (int i = 1; i < world && static_cast<int>(holders.size()) < replicas;
       ++i) {
    const int r = (rank + i) % world;
    if (std::find(holders.begin(), holders.end(), r) == holders.end()) {
      holders.push_back(r);
    }
  }
  return holders;
}

std::vector<int> ReplicaSourceRanks(int rank, const std::vector<int>& nodes,
                                    int replicas) {
  std::vector<int> sources;
  for (int r = 0; r < static_cast<int>(nodes.size()); ++r) {
    if (r == rank) continue;
    for (int h : ReplicaHolderRanks(r, nodes, replicas)) {
      if (h == rank) sources.push_back(r);
    }
  }
  return sources;
}

std::vector<int> AssignNodes(const std::vector<int>& hints,
                             const std::vector<int>& existing) {
  std::vector<int> out(hints.size(), -1);
  std::set<int> taken;
  int next = 0;
  for (int e : existing) next = std::max(next, e + 1);
  for (int h : hints) next = std::max(next, h + 1);
  for (size_t r = 0; r < hints.size(); ++r) {
    if (hints[r] >= 0 && taken.insert(hints[r]).second) out[r] = hints[r];
  }
  size_t e = 0;
  for (size_t r = 0; r < hints.size(); ++r) {
    if (out[r] >= 0) continue;
    while (e < existing.size() && taken.count(existing[e]) > 0) ++e;
    out[r] = e < existing.size() ? existing[e] : next++;
    taken.insert(out[r]);
  }
  return out;
}

}  // namespace hy::recovery
