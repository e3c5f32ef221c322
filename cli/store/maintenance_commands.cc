// hyctl gc and repair (see maintenance_commands.h).

#include "store/maintenance_commands.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli_util.h"
#include "hy/recovery/catalog.h"
#include "hy/recovery/node_layout.h"
#include "hy/recovery/retention.h"
#include "hy/recovery/run_root.h"
#include "hy/statestore/store.h"

namespace hy::cli {
namespace {

using statestore::Store;

Result<std::unique_ptr<Store>> OpenStore(const std::string& path,
                                         bool read_only) {
  Result<std::unique_ptr<Store>> s =
      recovery::OpenExistingStore(path, read_only);
  if (!s.ok()) return s.status().WithContext(path);
  return s;
}

std::string Steps(const std::vector<uint64_t>& versions) {
  std::string s;
  for (uint64_t v : versions) {
    s += (s.empty() ? "" : ",") + std::to_string(recovery::VersionStep(v));
  }
  return s.empty() ? "-" : s;
}

void PrintGc(const std::string& label, const statestore::GcReport& r,
             std::ostream& out = std::cout) {
  out << label << "dropped " << r.dropped_versions.size() << " versions (steps "
      << Steps(r.dropped_versions) << "), " << r.dropped_uncommitted.size()
      << " uncommitted leftovers, " << r.dropped_chunks << " chunks; reclaimed "
      << Mb(r.reclaimed_bytes) << " MB, repacked " << Mb(r.repacked_bytes)
      << " MB\n";
}

// gc of one store: keep the newest `keep` committed versions and the
// versions of `pinned_steps`.
int GcStore(const std::string& path, size_t keep,
            const std::vector<uint64_t>& pinned_steps) {
  auto store = OpenStore(path, /*read_only=*/false);
  if (!store.ok()) return Report("gc", store.status());
  Result<std::vector<statestore::VersionInfo>> versions =
      (*store)->ListVersions();
  if (!versions.ok()) return Report("gc", versions.status());
  statestore::GcOptions o;
  o.keep_last = keep;
  for (uint64_t step : pinned_steps) {
    bool found = false;
    for (const auto& v : *versions) {
      if (v.committed && v.commit.step == step) {
        o.pinned.insert(v.version);
        found = true;
      }
    }
    if (!found) {
      return Report(
          "gc",
          Status::NotFound("--pin " + std::to_string(step) + ": " + path +
                           " holds no committed step " + std::to_string(step)));
    }
  }
  Result<statestore::GcReport> r = (*store)->Gc(o);
  if (!r.ok()) return Report("gc", r.status().WithContext(path));
  PrintGc("", *r);
  return kExitOk;
}

// gc of a run root (recovery/retention.h).
int GcRoot(const recovery::RunRoot& run, size_t keep,
           const std::vector<uint64_t>& pinned_steps, int replicas) {
  const std::string& root = run.path();
  Result<recovery::RunRootScan> scan = run.Scan();
  if (!scan.ok()) return Report("gc", scan.status());
  for (const std::string& u : scan->catalog.unreadable()) {
    return Report("gc", recovery::ExplainLockedStore(Status::IOError(u), u));
  }
  std::set<uint64_t> pins(pinned_steps.begin(), pinned_steps.end());
  Result<recovery::RootRetention> plan = recovery::PlanRootRetention(
      scan->catalog, scan->nodes, keep, replicas, pins);
  if (!plan.ok()) return Report("gc", plan.status());
  const recovery::RetentionPolicy& p = plan->policy;
  std::cout << "live generation " << p.live_generation << " (newest step "
            << recovery::VersionStep(plan->newest_live) << ")";
  if (p.safe_version != 0) {
    std::cout << "; step " << recovery::VersionStep(p.safe_version) << " has "
              << plan->replicas
              << " replica(s) of every part: older generations' versions up "
                 "to it are superseded\n";
  } else {
    std::cout << "; earlier generations kept: " << plan->why_unsafe << "\n";
  }
  Result<std::vector<recovery::StoreLocation>> stores = run.Stores();
  if (!stores.ok()) return Report("gc", stores.status());
  std::vector<recovery::StoreRetention> done;
  Status s = recovery::ApplyRetention(*stores, p, "", &done);
  std::set<int> live_nodes;
  for (const recovery::CopyEntry& e : scan->catalog.entries()) {
    if (recovery::VersionGeneration(e.version) == p.live_generation) {
      live_nodes.insert(e.where.node);
    }
  }
  for (const recovery::StoreRetention& r : done) {
    PrintGc(r.where.path + ": ", r.report);
    if (r.removed) {
      std::cout << r.where.path << ": removed (holds nothing the run needs)\n";
    }
  }
  if (!s.ok()) return Report("gc", recovery::ExplainLockedStore(s, root));
  Result<std::vector<int>> gone = recovery::RemoveEmptyNodes(
      root, std::vector<int>(live_nodes.begin(), live_nodes.end()));
  if (!gone.ok()) return Report("gc", gone.status());
  for (int n : *gone) {
    std::cout << recovery::NodeDir(root, n)
              << ": removed (no store left; the run no longer uses the node)\n";
  }
  return kExitOk;
}

// drop: every version of `step` (every generation, committed or not) goes
// from every store under `root`, primaries and replicas. The newest
// recoverable step, what a resume would continue from, only with `force`.
int DropStep(const recovery::RunRoot& run, uint64_t step, bool force) {
  const std::string& root = run.path();
  Result<recovery::RunRootScan> scan = run.Scan();
  if (!scan.ok()) return Report("drop", scan.status());
  for (const std::string& u : scan->catalog.unreadable()) {
    return Report("drop", recovery::ExplainLockedStore(Status::IOError(u), u));
  }
  bool known = false;
  for (const recovery::CopyEntry& e : scan->catalog.entries()) {
    known = known || recovery::VersionStep(e.version) == step;
  }
  if (!known) {
    return Report("drop",
                  Status::NotFound("no store under " + root + " holds step " +
                                   std::to_string(step)));
  }
  Result<recovery::Choice> newest =
      recovery::ChooseVersion(scan->catalog, scan->nodes, {});
  if (newest.ok() && newest->commit.step == step && !force) {
    std::cerr << "hyctl drop: step " << step
              << " is the newest recoverable step under " << root
              << " (what --resume continues from); pass --force to drop it "
                 "anyway\n";
    return kExitUsage;
  }
  Status s = DropSteps(run, [step](uint64_t v) { return v == step; },
                       std::cout);
  return s.ok() ? kExitOk
                : Report("drop", recovery::ExplainLockedStore(s, root));
}

}  // namespace

Status DropSteps(const recovery::RunRoot& root,
                 const std::function<bool(uint64_t step)>& which,
                 std::ostream& out) {
  std::vector<recovery::DroppedStore> dropped;
  const Status s = root.DropSteps(which, &dropped);
  for (const recovery::DroppedStore& d : dropped) {
    PrintGc(d.where.path + ": ", d.report, out);
  }
  HY_RETURN_IF_ERROR(s);
  const recovery::DropTotals total = recovery::SumDropped(dropped);
  const std::string names = recovery::JoinSteps(total.steps);
  out << "dropped step(s) " << (names.empty() ? "-" : names) << ": "
      << total.versions << " version(s) from " << dropped.size()
      << " store(s)\n";
  return Status::OK();
}

namespace {

// repair: every store at `paths` takes damaged chunks from the others and
// from `sources`.
int Repair(const std::vector<std::string>& paths,
           const std::vector<std::string>& sources) {
  // Read-only handles of every possible source, opened on first use.
  std::map<std::string, std::unique_ptr<Store>> readers;
  std::vector<std::string> all = paths;
  all.insert(all.end(), sources.begin(), sources.end());
  std::vector<std::vector<std::string>> rows;
  uint64_t repaired = 0, unrepaired = 0, chunks = 0;
  for (const std::string& path : paths) {
    auto store = OpenStore(path, /*read_only=*/false);
    if (!store.ok()) return Report("repair", store.status());
    auto source = [&](const Hash128& address, uint64_t raw_length,
                      MutableBytes out) -> Status {
      std::string tried;
      for (const std::string& other : all) {
        if (other == path) continue;
        auto it = readers.find(other);
        if (it == readers.end()) {
          auto r = OpenStore(other, /*read_only=*/true);
          if (!r.ok()) continue;
          it = readers.emplace(other, std::move(r).value()).first;
        }
        Status s = it->second->ReadChunk(address, raw_length, out);
        if (s.ok()) return s;
        if (!s.IsNotFound()) tried += "; " + other + ": " + s.ToString();
      }
      return Status::NotFound("no other store holds an intact copy" + tried);
    };
    Result<statestore::RepairReport> r = (*store)->Repair(source);
    if (!r.ok()) return Report("repair", r.status().WithContext(path));
    chunks += r->chunks_checked;
    repaired += r->repaired.size();
    unrepaired += r->unrepaired.size();
    if (!r->repaired.empty()) {
      std::cout << path << ": " << r->repaired.size()
                << " damaged chunk(s) written again from another copy\n";
    }
    for (const statestore::BadChunk& b : r->unrepaired) {
      rows.push_back({path, b.tensor, std::to_string(b.rank),
                      std::to_string(b.index), b.address.ToHex(),
                      b.status.ToString()});
    }
  }
  std::cout << "checked " << paths.size() << " store(s), " << chunks
            << " chunk reference(s): " << repaired << " repaired, "
            << unrepaired << " without an intact copy\n";
  if (!rows.empty()) {
    std::cout << FormatTable(
        {"STORE", "TENSOR", "RANK", "CHUNK", "ADDRESS", "ERROR"}, rows);
    std::cerr << "hyctl repair: " << unrepaired
              << " chunk(s) have no intact copy; `hyctl gc` drops them once "
                 "no recoverable version needs them\n";
    return kExitDataLoss;
  }
  return kExitOk;
}

}  // namespace

void AddMaintenanceCommands(CLI::App* app, int* exit_code) {
  struct Args {
    std::string path;
    size_t keep = 1;
    std::vector<uint64_t> pinned;
    int replicas = -1;
    std::vector<std::string> from;
    uint64_t step = 0;
    bool force = false;
  };
  auto args = std::make_shared<Args>();

  CLI::App* gc = app->add_subcommand(
      "gc",
      "Drop versions no one needs, leftovers and unreferenced chunks; on a "
      "run root also superseded generations and stores left empty");
  gc->add_option("PATH", args->path, "Store directory, or a run root")
      ->required();
  gc->add_option("--keep", args->keep,
                 "Newest committed versions to keep (on a run root: of the "
                 "live generation, per store)")
      ->required()
      ->check(CLI::Range(size_t{1}, size_t{1} << 40).description("at least 1"));
  gc->add_option("--pin", args->pinned, "Also keep these steps");
  gc->add_option("--replicas", args->replicas,
                 "Run root: copies beyond the primary a version of the live "
                 "generation needs before it supersedes older generations "
                 "(default: as many as the best-copied part has)");
  gc->callback([args, exit_code] {
    Result<recovery::RunRoot> root = recovery::RunRoot::Open(args->path);
    *exit_code =
        root.ok() ? GcRoot(*root, args->keep, args->pinned, args->replicas)
                  : GcStore(args->path, args->keep, args->pinned);
  });

  CLI::App* drop = app->add_subcommand(
      "drop",
      "Remove every version of one step from every store of a run root "
      "(primaries and replicas); exit 64 for the newest recoverable step "
      "without --force");
  drop->add_option("RUN_ROOT", args->path, "Run root (hyctl train --store)")
      ->required();
  drop->add_option("--step", args->step, "The step to remove")->required();
  drop->add_flag("--force", args->force,
                 "Also drop the newest recoverable step (a resume then "
                 "continues from the one before)");
  drop->callback([args, exit_code] {
    Result<recovery::RunRoot> root = recovery::RunRoot::Open(args->path);
    if (!root.ok()) {
      *exit_code = ReportArgs("drop", root.status());
      return;
    }
    *exit_code = DropStep(*root, args->step, args->force);
  });

  CLI::App* repair = app->add_subcommand(
      "repair",
      "Write damaged chunks again from an intact copy (another store of the "
      "run root, or --from); exit 3 if some have none");
  repair->add_option("PATH", args->path, "Store directory, or a run root")
      ->required();
  repair->add_option("--from", args->from,
                     "Another store holding copies of the same chunks");
  repair->callback([args, exit_code] {
    std::vector<std::string> paths = {args->path};
    if (Result<recovery::RunRoot> root = recovery::RunRoot::Open(args->path);
        root.ok()) {
      if (Status s = root->RunId().status(); !s.ok()) {
        *exit_code = Report("repair", s);
        return;
      }
      Result<std::vector<recovery::StoreLocation>> stores = root->Stores();
      if (!stores.ok()) {
        *exit_code = Report("repair", stores.status());
        return;
      }
      paths.clear();
      for (const auto& s : *stores) paths.push_back(s.path);
    }
    *exit_code = Repair(paths, args->from);
  });
}

}  // namespace hy::cli
