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

// The number after `prefix` in `name`, or -1 if `name` is not prefix<k>.
int IdAfter(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix)) {
    return -1;
  }
  const std::string digits = name.substr(prefix.size());
  if (digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  return std::atoi(digits.c_str());
}

}  // namespace

std::string NodeDir(const std::string& root, int node) {
  return root + "/node-" + std::to_string(node);
}

std::string PrimaryStorePath(const std::string& root, int node) {
  return NodeDir(root, node) + "/store";
}

std::string ReplicaStorePath(const std::string& root, int holder, int source) {
  return NodeDir(root, holder) + "/replica-" + std::to_string(source);
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
  std::vector<int> sources;
  bool primary = false;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!it->is_directory(ec)) continue;
    if (name == "store") primary = true;
    const int source = IdAfter(name, "replica-");
    if (source >= 0) sources.push_back(source);
  }
  if (ec) return Status::IOError("listing " + dir + ": " + ec.message());
  if (primary) out.push_back({node, node, false, PrimaryStorePath(root, node)});
  std::sort(sources.begin(), sources.end());
  for (int s : sources) {
    out.push_back({node, s, true, ReplicaStorePath(root, node, s)});
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
  std::vector<int> holders;
  std::set<int> used = {nodes[rank]};
  for (int i = 1; i < world && static_cast<int>(holders.size()) < replicas;
       ++i) {
    const int r = (rank + i) % world;
    if (used.insert(nodes[r]).second) holders.push_back(r);
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
