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
#include "store/inspect_run.h"
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

// The live generation as gc and recovery see it, the step where it began,
// and the retention plan that says what it supersedes.
struct Generations {
  Result<recovery::RootRetention> plan = Status::NotFound("");
  uint32_t live = 0;
  uint64_t live_first_step = UINT64_MAX;
};

Generations FindGenerations(const recovery::RunRootScan& scan) {
  Generations g;
  g.plan = recovery::PlanRootRetention(scan.catalog, scan.nodes, 1, -1, {});
  g.live = g.plan.ok() ? g.plan->policy.live_generation : uint32_t{0};
  for (const recovery::CopyEntry& e : scan.catalog.entries()) {
    if (recovery::VersionGeneration(e.version) == g.live) {
      g.live_first_step =
          std::min(g.live_first_step, recovery::VersionStep(e.version));
    }
  }
  return g;
}

// Every version some copy holds: the live generation's first, newest
// first, then the others.
std::vector<uint64_t> VersionsInOrder(const recovery::Catalog& catalog,
                                      uint32_t live) {
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
  return versions;
}

// The old ranks of `version`: the commit's world, else every rank some copy
// holds.
std::set<int> RanksOf(const recovery::Catalog& catalog, uint64_t version,
                      const statestore::CommitRecord* commit) {
  std::set<int> ranks;
  if (commit) {
    for (int r = 0; r < commit->world_size; ++r) ranks.insert(r);
  }
  for (const recovery::CopyEntry& e : catalog.entries()) {
    if (e.version != version) continue;
    ranks.insert(e.ranks.begin(), e.ranks.end());
  }
  return ranks;
}

// A version's state ("recoverable", "uncommitted", "superseded", "retired",
// "abandoned", "lost", "damaged") and the verdict the table prints. Only the
// newest state of the live generation can be lost; older ones were
// superseded or retired.
struct Verdict {
  std::string state = "recoverable";
  std::string text;
};

Verdict Judge(uint64_t version, uint64_t step, bool committed,
              const Recoverability& rec, const Generations& g,
              const Result<recovery::Choice>& newest) {
  const bool other_gen = recovery::VersionGeneration(version) != g.live;
  Verdict v;
  if (rec.recoverable) {
    v.text = rec.needs_settling.empty()
                 ? std::string("yes")
                 : "yes, once settled (rank(s) " +
                       JoinInts(rec.needs_settling) + " only prepared)";
  } else if (!committed) {
    v.state = "uncommitted";
    v.text = "no: " + rec.why;
  } else if (other_gen && g.plan.ok() && g.plan->policy.Superseded(version)) {
    v.state = "superseded";
    v.text =
        "superseded by step " +
        std::to_string(recovery::VersionStep(g.plan->policy.safe_version)) +
        " of generation " + std::to_string(g.live) + " (gc drops it)";
  } else if (rec.missing && newest.ok() && newest->version > version) {
    v.state = "retired";
    v.text = "retired: retention dropped some copies (step " +
             std::to_string(newest->commit.step) +
             " is recoverable; gc drops the rest)";
  } else if (other_gen && step >= g.live_first_step) {
    v.state = "abandoned";
    v.text = "abandoned: generation " + std::to_string(g.live) +
             " went on from step " + std::to_string(g.live_first_step) +
             " (" + rec.why + ")";
  } else {
    v.state = rec.missing ? "lost" : "damaged";
    v.text = "no: " + rec.why;
  }
  return v;
}

// Where old rank `rank`'s part of `version` has copies: the table's text,
// the JSON list, and how many are committed.
struct RankCopies {
  std::string where;
  ordered_json json = ordered_json::array();
  int committed = 0;
};

RankCopies CopiesOfRank(const recovery::Catalog& catalog, uint64_t version,
                        int rank,
                        const std::map<std::string, std::string>& damaged) {
  RankCopies c;
  for (const recovery::CopyEntry& e : catalog.entries()) {
    if (e.version != version ||
        std::find(e.ranks.begin(), e.ranks.end(), rank) == e.ranks.end()) {
      continue;
    }
    if (e.state == recovery::CopyState::kCommitted) ++c.committed;
    auto harm = damaged.find(recovery::CopyKey(e, rank));
    std::string text = DescribeCopyWithState(e);
    if (harm != damaged.end()) {
      text.insert(text.size() - 1, ", damaged: " + harm->second);
    }
    c.where += (c.where.empty() ? "" : ", ") + text;
    ordered_json jc{{"node", e.where.node},
                    {"source_node", e.where.source_node},
                    {"replica", e.where.replica},
                    {"state", recovery::CopyStateName(e.state)},
                    {"path", e.where.path}};
    if (harm != damaged.end()) jc["damaged"] = harm->second;
    c.json.push_back(std::move(jc));
  }
  return c;
}

// The host of each node, as its directory records it, and whether several
// ranks (nodes, or slots of one node) all run on one host.
struct Hosts {
  std::map<int, std::string> of_node;
  std::set<std::string> distinct;
  bool single_host = false;
};

Hosts FindHosts(const std::string& root, const std::vector<int>& nodes) {
  Hosts h;
  for (int n : nodes) {
    h.of_node[n] = recovery::RecordedHostname(root, n);
    if (!h.of_node[n].empty()) h.distinct.insert(h.of_node[n]);
  }
  size_t primaries = 0;
  for (int n : nodes) {
    Result<std::vector<recovery::StoreLocation>> stores =
        recovery::ListNodeStores(root, n);
    for (const auto& s :
         stores.ok() ? *stores : std::vector<recovery::StoreLocation>()) {
      primaries += s.replica ? 0 : 1;
    }
  }
  h.single_host = primaries > 1 && h.distinct.size() == 1;
  return h;
}

// What inspect found, for either output format.
struct Inspection {
  std::string root;
  const recovery::RunRootScan* scan = nullptr;
  uint32_t live = 0;
  bool quick = false;
  std::map<std::string, std::string> damaged;
  Result<recovery::Choice> newest = Status::NotFound("");
  std::vector<std::vector<std::string>> rows;  // The table's.
  ordered_json versions = ordered_json::array();
  Hosts hosts;
};

// One version's table rows (one per old rank) and JSON object.
void AddVersion(Inspection* in, const Generations& g, uint64_t version,
                const statestore::CommitRecord* commit, uint64_t step) {
  const recovery::Catalog& catalog = in->scan->catalog;
  Recoverability rec;
  if (commit) {
    rec = CheckVersion(catalog, in->scan->nodes, version, *commit,
                       in->damaged);
  } else {
    rec.why = "committed in no store";
  }
  const Verdict verdict =
      Judge(version, step, commit != nullptr, rec, g, in->newest);
  ordered_json jranks = ordered_json::array();
  for (int r : RanksOf(catalog, version, commit)) {
    RankCopies c = CopiesOfRank(catalog, version, r, in->damaged);
    in->rows.push_back(
        {std::to_string(step), std::to_string(version),
         std::to_string(recovery::VersionGeneration(version)),
         commit ? std::to_string(commit->world_size) : "-", std::to_string(r),
         c.where.empty() ? "none" : c.where, verdict.text});
    jranks.push_back({{"rank", r},
                      {"committed_copies", c.committed},
                      {"copies", std::move(c.json)}});
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
             {"state", verdict.state},
             {"needs_settling", rec.needs_settling},
             {"ranks", std::move(jranks)}});
  if (!rec.recoverable) jv["reason"] = verdict.text;
  in->versions.push_back(std::move(jv));
}

void PrintJson(Inspection& in) {
  ordered_json jhosts = ordered_json::object();
  for (const auto& [n, h] : in.hosts.of_node) jhosts[std::to_string(n)] = h;
  ordered_json out{{"root", in.root},
                   {"nodes", in.scan->nodes},
                   {"hosts", std::move(jhosts)},
                   {"single_host", in.hosts.single_host},
                   {"live_generation", in.live},
                   {"chunks_checked", !in.quick},
                   {"damaged_copies", in.damaged.size()},
                   {"versions", std::move(in.versions)}};
  if (in.newest.ok()) {
    out["recoverable"] = true;
    out["recover_step"] = in.newest->commit.step;
    out["recover_version"] = in.newest->version;
  } else {
    out["recoverable"] = false;
    out["reason"] = std::string(in.newest.status().message());
  }
  out["unreadable"] = in.scan->catalog.unreadable();
  std::cout << out.dump(2) << "\n";
}

void PrintTable(const Inspection& in) {
  std::cout << "run root " << in.root << ": nodes "
            << JoinInts(in.scan->nodes);
  std::string on;
  for (const auto& [n, h] : in.hosts.of_node) {
    if (!h.empty()) on += (on.empty() ? "" : ", ") + std::to_string(n) + " " + h;
  }
  if (!on.empty()) std::cout << " (hosts: " << on << ")";
  std::cout << "\n";
  if (in.hosts.single_host) {
    std::cout << "every node is on host " << *in.hosts.distinct.begin()
              << ": replicas guard against a lost process or disk there, "
                 "not against losing the host\n";
  }
  std::cout << FormatTable(
      {"STEP", "VERSION", "GEN", "WORLD", "RANK", "COPIES", "RECOVERABLE"},
      in.rows);
  if (!in.damaged.empty()) {
    std::cout << in.damaged.size() << " damaged cop(ies): hyctl repair "
              << in.root << " writes them again from intact copies\n";
  }
  if (in.newest.ok()) {
    std::cout << "recoverable: step " << in.newest->commit.step << " (version "
              << in.newest->version << ", generation "
              << recovery::VersionGeneration(in.newest->version) << ")\n";
  } else {
    std::cout << "not recoverable: " << in.newest.status().message() << "\n";
  }
  for (const std::string& u : in.scan->catalog.unreadable()) {
    std::cerr << "hyctl inspect: unreadable store " << u << "\n";
  }
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
  Inspection in;
  in.root = root;
  in.scan = &*scan;
  in.quick = quick;
  if (!quick) {
    Status s = FindDamagedCopies(catalog, only_step, &in.damaged);
    if (!s.ok()) return Report("inspect", s);
  }
  std::set<std::string> bad;
  for (const auto& [key, why] : in.damaged) bad.insert(key);
  const Generations g = FindGenerations(*scan);
  in.live = g.live;
  in.newest = recovery::ChooseVersion(
      catalog, scan->nodes, bad,
      only_step ? static_cast<int64_t>(*only_step) : int64_t{-1});
  for (uint64_t version : VersionsInOrder(catalog, g.live)) {
    const statestore::CommitRecord* commit = catalog.FindCommit(version);
    const uint64_t step =
        commit ? commit->step : recovery::VersionStep(version);
    if (only_step && step != *only_step) continue;
    AddVersion(&in, g, version, commit, step);
  }
  if (only_step && in.versions.empty()) {
    return Report("inspect",
                  Status::NotFound("no store under " + root + " holds step " +
                                   std::to_string(*only_step)));
  }
  in.hosts = FindHosts(root, scan->nodes);
  if (format == "json") {
    PrintJson(in);
  } else {
    PrintTable(in);
  }
  return kExitOk;
}

}  // namespace hy::cli
