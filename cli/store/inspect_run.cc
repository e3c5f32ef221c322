// hyctl inspect on a run root: every node's stores, version by version,
// where each old rank's part has copies, and whether the version is
// recoverable (see store_commands.h).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli_util.h"
#include "hy/recovery/catalog.h"
#include "hy/recovery/node_identity.h"
#include "hy/recovery/node_layout.h"
#include "hy/recovery/retention.h"
#include "hy/recovery/run_root.h"
#include "hy/statestore/store.h"
#include "store/store_commands.h"

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
  bool missing = false;  // Some old rank has no copy at all.
};

Recoverability CheckVersion(const recovery::Catalog& catalog,
                            const std::vector<int>& nodes, uint64_t version,
                            const statestore::CommitRecord& commit,
                            const std::map<std::string, std::string>& damaged) {
  const uint64_t step = commit.step;
  const int world_size = commit.world_size;
  std::set<std::string> bad;
  for (const auto& [key, why] : damaged) bad.insert(key);
  for (const recovery::CopyEntry& e : catalog.entries()) {
    if (e.version == version) continue;
    for (int r : e.ranks) bad.insert(recovery::CopyKey(e, r));
  }
  Recoverability out;
  Result<recovery::Choice> choice =
      recovery::ChooseVersion(catalog, nodes, bad, static_cast<int64_t>(step));
  if (!choice.ok() || choice->version != version) {
    // Name the ranks left without a usable copy, as ChooseVersion counts.
    std::vector<int> lost, only_damaged;
    for (int r = 0; r < world_size; ++r) {
      bool held = false, intact = false;
      for (const recovery::CopyEntry& e : catalog.entries()) {
        if (e.version != version || e.state == recovery::CopyState::kAborted ||
            std::count(e.ranks.begin(), e.ranks.end(), r) == 0) {
          continue;
        }
        held = true;
        intact = intact || damaged.count(recovery::CopyKey(e, r)) == 0;
      }
      if (!held) lost.push_back(r);
      if (held && !intact) only_damaged.push_back(r);
    }
    out.missing = !lost.empty();
    out.why = !lost.empty()
                  ? "every copy of old rank(s) " + JoinInts(lost) + " is lost"
              : !only_damaged.empty()
                  ? "every copy of old rank(s) " + JoinInts(only_damaged) +
                        " is damaged"
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

// Verifies every committed copy under the run root (or only `only_step`'s)
// and records, for each damaged copy (CopyKey), its first bad chunk.
Status FindDamagedCopies(const recovery::Catalog& catalog,
                         std::optional<uint64_t> only_step,
                         std::map<std::string, std::string>* damaged) {
  std::map<std::string, std::vector<const recovery::CopyEntry*>> by_store;
  for (const recovery::CopyEntry& e : catalog.entries()) {
    if (e.state != recovery::CopyState::kCommitted) continue;
    if (only_step && recovery::VersionStep(e.version) != *only_step) continue;
    by_store[e.where.path].push_back(&e);
  }
  for (const auto& [path, copies] : by_store) {
    statestore::StoreOptions o;
    o.read_only = true;
    o.create_if_missing = false;
    HY_ASSIGN_OR_RETURN(std::unique_ptr<statestore::Store> store,
                        statestore::Store::Open(path, o));
    for (const recovery::CopyEntry* e : copies) {
      Result<statestore::VerifyReport> r = store->Verify(e->version);
      for (int rank : e->ranks) {
        std::string why;
        if (!r.ok()) {
          why = r.status().ToString();
        } else {
          for (const statestore::BadChunk& b : r->bad) {
            if (b.rank != rank) continue;
            why = "chunk " + std::to_string(b.index) + " of '" + b.tensor +
                  "' (" + b.address.ToHex().substr(0, 12) + ")";
            break;
          }
        }
        if (!why.empty()) (*damaged)[recovery::CopyKey(*e, rank)] = why;
      }
    }
  }
  return Status::OK();
}

}  // namespace

// One row per old rank of every version (committed or not) under `root`,
// the copies of its part, and whether the version is recoverable; then the
// version recovery would choose. `only_step` keeps that step's versions.
int InspectRunRoot(const std::string& root, std::optional<uint64_t> only_step,
                   const std::string& format, bool quick) {
  Result<recovery::RunRoot> run = recovery::RunRoot::Open(root);
  if (!run.ok()) return Report("inspect", run.status());
  Result<recovery::RunRootScan> scan = run->Scan();
  if (!scan.ok()) return Report("inspect", scan.status());
  const recovery::Catalog& catalog = scan->catalog;
  std::map<std::string, std::string> damaged;
  if (!quick) {
    Status s = FindDamagedCopies(catalog, only_step, &damaged);
    if (!s.ok()) return Report("inspect", s);
  }
  std::set<std::string> bad;
  for (const auto& [key, why] : damaged) bad.insert(key);
  // The live generation, what it supersedes, and the newest recoverable
  // version, as gc and recovery see them.
  Result<recovery::RootRetention> plan =
      recovery::PlanRootRetention(catalog, scan->nodes, 1, -1, {});
  const uint32_t live = plan.ok() ? plan->policy.live_generation : uint32_t{0};
  uint64_t live_first_step = UINT64_MAX;  // Where the live generation began.
  for (const recovery::CopyEntry& e : catalog.entries()) {
    if (recovery::VersionGeneration(e.version) == live) {
      live_first_step =
          std::min(live_first_step, recovery::VersionStep(e.version));
    }
  }
  Result<recovery::Choice> newest = recovery::ChooseVersion(
      catalog, scan->nodes, bad,
      only_step ? static_cast<int64_t>(*only_step) : int64_t{-1});

  // The live generation's versions first, newest first, then the others.
  std::vector<uint64_t> versions;
  for (const recovery::CopyEntry& e : catalog.entries()) {
    versions.push_back(e.version);
  }
  std::sort(versions.begin(), versions.end(), [live](uint64_t a, uint64_t b) {
    const bool la = recovery::VersionGeneration(a) == live;
    const bool lb = recovery::VersionGeneration(b) == live;
    return la != lb ? la : a > b;
  });
  versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
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
      rec = CheckVersion(catalog, scan->nodes, version, *commit, damaged);
    } else {
      rec.why = "committed in no store";
    }
    // What an unrecoverable version is: only the newest state of the live
    // generation can be lost; older ones were superseded or retired.
    const bool other_gen = recovery::VersionGeneration(version) != live;
    std::string state = "recoverable";
    std::string verdict;
    if (rec.recoverable) {
      verdict = rec.needs_settling.empty()
                    ? std::string("yes")
                    : "yes, once settled (rank(s) " +
                          JoinInts(rec.needs_settling) + " only prepared)";
    } else if (!commit) {
      state = "uncommitted";
      verdict = "no: " + rec.why;
    } else if (other_gen && plan.ok() && plan->policy.Superseded(version)) {
      state = "superseded";
      verdict =
          "superseded by step " +
          std::to_string(recovery::VersionStep(plan->policy.safe_version)) +
          " of generation " + std::to_string(live) + " (gc drops it)";
    } else if (rec.missing && newest.ok() && newest->version > version) {
      state = "retired";
      verdict = "retired: retention dropped some copies (step " +
                std::to_string(newest->commit.step) +
                " is recoverable; gc drops the rest)";
    } else if (other_gen && step >= live_first_step) {
      state = "abandoned";
      verdict = "abandoned: generation " + std::to_string(live) +
                " went on from step " + std::to_string(live_first_step) + " (" +
                rec.why + ")";
    } else {
      state = rec.missing ? "lost" : "damaged";
      verdict = "no: " + rec.why;
    }
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
        auto harm = damaged.find(recovery::CopyKey(e, r));
        std::string text = DescribeCopyWithState(e);
        if (harm != damaged.end()) {
          text.insert(text.size() - 1, ", damaged: " + harm->second);
        }
        where += (where.empty() ? "" : ", ") + text;
        ordered_json jc{{"node", e.where.node},
                        {"source_node", e.where.source_node},
                        {"replica", e.where.replica},
                        {"state", recovery::CopyStateName(e.state)},
                        {"path", e.where.path}};
        if (harm != damaged.end()) jc["damaged"] = harm->second;
        jcopies.push_back(std::move(jc));
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
               {"state", state},
               {"needs_settling", rec.needs_settling},
               {"ranks", std::move(jranks)}});
    if (!rec.recoverable) jv["reason"] = verdict;
    jversions.push_back(std::move(jv));
  }

  if (only_step && jversions.empty()) {
    return Report("inspect",
                  Status::NotFound("no store under " + root + " holds step " +
                                   std::to_string(*only_step)));
  }
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
                     {"live_generation", live},
                     {"chunks_checked", !quick},
                     {"damaged_copies", damaged.size()},
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
    if (!damaged.empty()) {
      std::cout << damaged.size() << " damaged cop(ies): hyctl repair " << root
                << " writes them again from intact copies\n";
    }
    if (newest.ok()) {
      std::cout << "recoverable: step " << newest->commit.step << " (version "
                << newest->version << ", generation "
                << recovery::VersionGeneration(newest->version) << ")\n";
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
