// Node ids from host identity (see hy/recovery/node_identity.h).

#include "hy/recovery/node_identity.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "hy/recovery/node_layout.h"

namespace hy::recovery {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::string HostFile(const std::string& root, int node) {
  return NodeDir(root, node) + "/host";
}

// The host file of `node` as JSON; null if absent or unreadable.
json ReadHostFile(const std::string& root, int node) {
  std::ifstream in(HostFile(root, node));
  if (!in) return json();
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, false);
  return j.is_object() ? j : json();
}

// The highest replica source id in `node`'s directory, or -1.
int MaxReplicaSource(const std::string& root, int node) {
  Result<std::vector<StoreLocation>> stores = ListNodeStores(root, node);
  int best = -1;
  for (const StoreLocation& s :
       stores.ok() ? *stores : std::vector<StoreLocation>()) {
    best = std::max(best, s.source_node);
  }
  return best;
}

}  // namespace

Result<NodeReport> ReportNode(const std::string& root) {
  NodeReport r;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
  r.hostname = name[0] != '\0' ? name : "unknown-host";
  if (const char* g = Env("GROUP_RANK")) r.group = std::atoi(g);
  if (const char* id = Env("HY_NODE_ID")) {
    char* end = nullptr;
    const long v = std::strtol(id, &end, 10);
    if (*end != '\0' || v < 0 || v > 999999999) {
      return Status::InvalidArgument(std::string("HY_NODE_ID '") + id +
                                     "' is not a node id (0, 1, ...)");
    }
    r.hint = static_cast<int>(v);
    r.key = "node-" + std::to_string(v);
  } else if (const char* host = Env("HY_HOST_ID")) {
    r.key = std::string("host:") + host;
  } else {
    r.key = "host:" + r.hostname;
  }
  HY_ASSIGN_OR_RETURN(std::vector<int> nodes, ListNodes(root));
  for (int n : nodes) {
    r.max_seen = std::max({r.max_seen, n, MaxReplicaSource(root, n)});
    const json host = ReadHostFile(root, n);
    if (r.found < 0 && host.is_object() && host.value("key", "") == r.key) {
      r.found = n;
    }
  }
  return r;
}

std::string EncodeNodeReport(const NodeReport& r) {
  return json{{"key", r.key},     {"hostname", r.hostname},
              {"group", r.group}, {"hint", r.hint},
              {"found", r.found}, {"max_seen", r.max_seen}}
      .dump();
}

Result<NodeReport> DecodeNodeReport(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  NodeReport r;
  try {
    r.key = j.at("key").get<std::string>();
    r.hostname = j.at("hostname").get<std::string>();
    r.group = j.at("group").get<int>();
    r.hint = j.at("hint").get<int>();
    r.found = j.at("found").get<int>();
    r.max_seen = j.at("max_seen").get<int>();
  } catch (const std::exception& e) {
    return Status::DataLoss(std::string("node report: ") + e.what());
  }
  return r;
}

Result<std::vector<int>> AssignNodesByIdentity(
    const std::vector<NodeReport>& reports) {
  std::map<int, std::string> group_key;  // torchrun agent -> its key.
  int next = 0;
  for (const NodeReport& r : reports) {
    next = std::max({next, r.max_seen + 1, r.hint + 1, r.found + 1});
    if (r.group < 0) continue;
    auto [it, fresh] = group_key.emplace(r.group, r.key);
    if (!fresh && it->second != r.key) {
      return Status::FailedPrecondition(
          "ranks of torchrun agent " + std::to_string(r.group) +
          " report different host identities ('" + it->second + "' and '" +
          r.key + "'); set HY_HOST_ID alike for the ranks of one host");
    }
  }
  std::map<std::string, int> node_of;  // Key -> node id, -1: to assign.
  for (const NodeReport& r : reports) {
    const int id = r.hint >= 0 ? r.hint : r.found;
    auto [it, fresh] = node_of.emplace(r.key, id);
    if (!fresh && it->second != id) {
      return Status::FailedPrecondition(
          "ranks with host identity '" + r.key +
          "' see different node "
          "directories (node " +
          std::to_string(it->second) + " and node " + std::to_string(id) +
          "): one host name on several disks? give "
          "each host its own HY_HOST_ID");
    }
  }
  std::map<int, std::string> key_of;  // Node id -> key.
  for (auto& [key, id] : node_of) {
    if (id < 0) id = next++;
    auto [it, fresh] = key_of.emplace(id, key);
    if (!fresh) {
      return Status::FailedPrecondition("hosts '" + it->second + "' and '" +
                                        key + "' both claim node " +
                                        std::to_string(id));
    }
  }
  std::vector<int> out;
  for (const NodeReport& r : reports) out.push_back(node_of.at(r.key));
  return out;
}

Status RecordHost(const std::string& root, int node, const NodeReport& r) {
  const std::string dir = NodeDir(root, node);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError("creating " + dir + ": " + ec.message());
  const std::string path = HostFile(root, node);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json{{"key", r.key}, {"hostname", r.hostname}}.dump() << "\n";
    out.flush();
    if (!out) return Status::IOError("writing " + tmp);
  }
  fs::rename(tmp, path, ec);
  if (ec) return Status::IOError("renaming " + tmp + ": " + ec.message());
  return Status::OK();
}

std::string RecordedHostname(const std::string& root, int node) {
  const json host = ReadHostFile(root, node);
  return host.is_object() ? host.value("hostname", "") : std::string();
}

}  // namespace hy::recovery
