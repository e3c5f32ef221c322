// hyctl inspect on a run root: every node's stores, version by version,
// where each old rank's part has copies, and whether the version is
// recoverable (see store_commands.h).

#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli_util.h"
#include "hy/recovery/catalog.h"
#include "hy/recovery/node_identity.h"
#include "hy/recovery/node_layout.h"
#include "restore_command.h"
#include "store_commands.h"

namespace hy::cli {
namespace {

using nlohmann::ordered_json;

// "primary on node 0 (committed)", "replica of node 1 on node 2 (prepared)".
std::string DescribeCopyWithState(const recovery::CopyEntry& e) {
  return recovery::DescribeCopy(e) + " (" + recovery::CopyStateName(e.state) +
         ")";
}

std::string JoinInts(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// Whether `version` can be recovered, as recovery::ChooseVersion decides:
// its step is chosen with every copy of the step's other versions (other
// generations) counted bad, so only this version's copies are considered.
struct Recoverability {
  bool recoverable = false;
  // The ranks whose chosen copy is only prepared: recovery commits it there
  // first (SettleLeftovers); until then readers (hyctl restore) refuse it.
  std::vector<int> needs_settling;
  std::string why;  // When not recoverable.
};

Recoverability CheckVersion(const recovery::Catalog& catalog,
                            const std::vector<int>& nodes, uint64_t version,
                            const statestore::CommitRecord& commit) {
  const uint64_t step = commit.step;
  const int world_size = commit.world_size;
  std::set<std::string> bad;
  for (const recovery::CopyEntry& e : catalog.entries()) {
    if (e.version == version) continue;
    for (int r : e.ranks) bad.insert(recovery::CopyKey(e, r));
  }
  Recoverability out;
  Result<recovery::Choice> choice =
      recovery::ChooseVersion(catalog, nodes, bad, static_cast<int64_t>(step));
  if (!choice.ok() || choice->version != version) {
    // Name the ranks left without a usable copy, as ChooseVersion counts.
    std::vector<int> lost;
    for (int r = 0; r < world_size; ++r) {
      bool held = false;
      for (const recovery::CopyEntry& e : catalog.entries()) {
        held = held || (e.version == version &&
                        e.state != recovery::CopyState::kAborted &&
                        std::count(e.ranks.begin(), e.ranks.end(), r) > 0);
      }
      if (!held) lost.push_back(r);
    }
    out.why = !lost.empty()
                  ? "every copy of old rank(s) " + JoinInts(lost) + " is lost"
              : choice.ok() ? "another version of the step was chosen"
                            : std::string(choice.status().message());
    return out;
  }
  out.recoverable = true;
  for (size_t r = 0; r < choice->source.size(); ++r) {
    if (choice->source[r].state != recovery::CopyState::kCommitted) {
      out.needs_settling.push_back(static_cast<int>(r));
    }
  }
  return out;
}

}  // namespace

// One row per old rank of every version (committed or not) under `root`,
// the copies of its part, and whether the version is recoverable; then the
// version recovery would choose. `only_step` keeps that step's versions.
int InspectRunRoot(const std::string& root, std::optional<uint64_t> only_step,
                   const std::string& format) {
  Result<RunRootScan> scan = ScanRunRoot(root);
  if (!scan.ok()) return Report("inspect", scan.status());
  const recovery::Catalog& catalog = scan->catalog;

  std::set<uint64_t, std::greater<>> versions;
  for (const recovery::CopyEntry& e : catalog.entries()) {
    versions.insert(e.version);
  }
  std::vector<std::vector<std::string>> rows;
  ordered_json jversions = ordered_json::array();
  for (uint64_t version : versions) {
    const statestore::CommitRecord* commit = catalog.FindCommit(version);
    const uint64_t step =
        commit ? commit->step : recovery::VersionStep(version);
    if (only_step && step != *only_step) continue;
    // The old ranks: the commit's world, else every rank some copy holds.
    std::set<int> ranks;
    if (commit) {
      for (int r = 0; r < commit->world_size; ++r) ranks.insert(r);
    }
    for (const recovery::CopyEntry& e : catalog.entries()) {
      if (e.version != version) continue;
      ranks.insert(e.ranks.begin(), e.ranks.end());
    }
    Recoverability rec;
    if (commit) {
      rec = CheckVersion(catalog, scan->nodes, version, *commit);
    } else {
      rec.why = "committed in no store";
    }
    std::string verdict =
        rec.recoverable
            ? (rec.needs_settling.empty()
                   ? std::string("yes")
                   : "yes, once settled (rank(s) " +
                         JoinInts(rec.needs_settling) + " only prepared)")
            : "no: " + rec.why;
    ordered_json jranks = ordered_json::array();
    for (int r : ranks) {
      std::string where;
      ordered_json jcopies = ordered_json::array();
      int committed = 0;
      for (const recovery::CopyEntry& e : catalog.entries()) {
        if (e.version != version ||
            std::find(e.ranks.begin(), e.ranks.end(), r) == e.ranks.end()) {
          continue;
        }
        if (e.state == recovery::CopyState::kCommitted) ++committed;
        where += (where.empty() ? "" : ", ") + DescribeCopyWithState(e);
        jcopies.push_back({{"node", e.where.node},
                           {"source_node", e.where.source_node},
                           {"replica", e.where.replica},
                           {"state", recovery::CopyStateName(e.state)},
                           {"path", e.where.path}});
      }
      rows.push_back({std::to_string(step), std::to_string(version),
                      std::to_string(recovery::VersionGeneration(version)),
                      commit ? std::to_string(commit->world_size) : "-",
                      std::to_string(r), where.empty() ? "none" : where,
                      verdict});
      jranks.push_back({{"rank", r},
                        {"committed_copies", committed},
                        {"copies", std::move(jcopies)}});
    }
    ordered_json jv{{"version", version},
                    {"step", step},
                    {"generation", recovery::VersionGeneration(version)},
                    {"committed", commit != nullptr}};
    if (commit) {
      jv.update({{"time", Iso8601(commit->wall_time_ms)},
                 {"world_size", commit->world_size},
                 {"layout", commit->layout}});
    }
    jv.update({{"recoverable", rec.recoverable},
               {"needs_settling", rec.needs_settling},
               {"ranks", std::move(jranks)}});
    if (!rec.recoverable) jv["reason"] = rec.why;
    jversions.push_back(std::move(jv));
  }

  if (only_step && jversions.empty()) {
    return Report("inspect",
                  Status::NotFound("no store under " + root + " holds step " +
                                   std::to_string(*only_step)));
  }
  // The version recovery (and hyctl restore) would take.
  Result<recovery::Choice> newest = recovery::ChooseVersion(
      catalog, scan->nodes, {},
      only_step ? static_cast<int64_t>(*only_step) : int64_t{-1});
  // The host of each node, as its directory records it.
  std::map<int, std::string> hosts;
  std::set<std::string> distinct;
  for (int n : scan->nodes) {
    hosts[n] = recovery::RecordedHostname(root, n);
    if (!hosts[n].empty()) distinct.insert(hosts[n]);
  }
  // Several ranks (nodes, or slots of one node) all on one host.
  size_t primaries = 0;
  for (int n : scan->nodes) {
    Result<std::vector<recovery::StoreLocation>> stores =
        recovery::ListNodeStores(root, n);
    for (const auto& s :
         stores.ok() ? *stores : std::vector<recovery::StoreLocation>()) {
      primaries += s.replica ? 0 : 1;
    }
  }
  const bool single_host = primaries > 1 && distinct.size() == 1;
  if (format == "json") {
    ordered_json jhosts = ordered_json::object();
    for (const auto& [n, h] : hosts) jhosts[std::to_string(n)] = h;
    ordered_json out{{"root", root},
                     {"nodes", scan->nodes},
                     {"hosts", std::move(jhosts)},
                     {"single_host", single_host},
                     {"versions", std::move(jversions)}};
    if (newest.ok()) {
      out["recoverable"] = true;
      out["recover_step"] = newest->commit.step;
      out["recover_version"] = newest->version;
    } else {
      out["recoverable"] = false;
      out["reason"] = std::string(newest.status().message());
    }
    out["unreadable"] = catalog.unreadable();
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "run root " << root << ": nodes " << JoinInts(scan->nodes);
    std::string on;
    for (const auto& [n, h] : hosts) {
      if (!h.empty())
        on += (on.empty() ? "" : ", ") + std::to_string(n) + " " + h;
    }
    if (!on.empty()) std::cout << " (hosts: " << on << ")";
    std::cout << "\n";
    if (single_host) {
      std::cout << "every node is on host " << *distinct.begin()
                << ": replicas guard against a lost process or disk there, "
                   "not against losing the host\n";
    }
    std::cout << FormatTable(
        {"STEP", "VERSION", "GEN", "WORLD", "RANK", "COPIES", "RECOVERABLE"},
        rows);
    if (newest.ok()) {
      std::cout << "recoverable: step " << newest->commit.step << " (version "
                << newest->version << ")\n";
    } else {
      std::cout << "not recoverable: " << newest.status().message() << "\n";
    }
    for (const std::string& u : catalog.unreadable()) {
      std::cerr << "hyctl inspect: unreadable store " << u << "\n";
    }
  }
  return kExitOk;
}

}  // namespace hy::cli
