#include "hy/recovery/run_root.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string_view>

#include "hy/recovery/run_identity.h"

namespace hy::recovery {
namespace {

namespace fs = std::filesystem;

bool IsNodeDirName(const std::string& name) {
  constexpr std::string_view kPrefix = "node-";
  return name.size() > kPrefix.size() && name.rfind(kPrefix, 0) == 0 &&
         std::all_of(name.begin() + kPrefix.size(), name.end(),
                     [](unsigned char c) { return std::isdigit(c); });
}

bool HasNodes(const std::string& path) {
  Result<std::vector<int>> nodes = ListNodes(path);
  return nodes.ok() && !nodes->empty();
}

}  // namespace

std::set<uint64_t> RunRootScan::Steps() const {
  std::set<uint64_t> out;
  for (const CopyEntry& e : catalog.entries()) {
    out.insert(VersionStep(e.version));
  }
  return out;
}

std::set<uint64_t> RunRootScan::CommittedSteps() const {
  std::set<uint64_t> out;
  for (const CopyEntry& e : catalog.entries()) {
    if (e.state == CopyState::kCommitted) out.insert(e.commit.step);
  }
  return out;
}

PathKind RunRoot::Classify(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return PathKind::kMissing;
  if (HasNodes(path)) return PathKind::kRunRoot;
  if (fs::exists(fs::path(path) / "CURRENT", ec)) {  // A RocksDB: a store.
    return Enclosing(path).empty() ? PathKind::kStore : PathKind::kRunStore;
  }
  return PathKind::kOther;
}

std::string RunRoot::Enclosing(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // A trailing '/'.
  if (!IsNodeDirName(p.parent_path().filename().string())) return "";
  const fs::path root = p.parent_path().parent_path();
  return root.empty() ? "." : root.string();
}

Result<RunRoot> RunRoot::Open(const std::string& path) {
  switch (Classify(path)) {
    case PathKind::kRunRoot:
      return RunRoot(path);
    case PathKind::kMissing:
      return Status::NotFound(path + " does not exist");
    case PathKind::kRunStore:
      return Status::InvalidArgument(path +
                                     " is a single store, not a run root; "
                                     "pass the run root " +
                                     Enclosing(path) + " that holds it");
    case PathKind::kStore:
      return Status::InvalidArgument(
          path +
          " is a single store, not a run root (the directory of node-<k>/ "
          "directories that hyctl train writes)");
    case PathKind::kOther:
      break;
  }
  return Status::NotFound(path +
                          " is not a run root (it holds no node-<k> "
                          "directory)");
}

Result<std::vector<int>> RunRoot::Nodes() const { return ListNodes(path_); }

Result<std::vector<StoreLocation>> RunRoot::Stores() const {
  return ListRootStores(path_);
}

Result<std::string> RunRoot::RunId() const {
  return RefuseMixed(RecordedRunId(path_, /*skip_unreadable=*/true));
}

Result<std::string> RunRoot::RefuseMixed(Result<std::string> run) const {
  if (run.status().code() != StatusCode::kFailedPrecondition) return run;
  return Status::FailedPrecondition(
      std::string(run.status().message()) +
      ": refusing to treat them as one run; move the other run's node "
      "directories out of " +
      path_);
}

Result<RunRootScan> RunRoot::Scan(bool allow_other_run) const {
  RunRootScan out;
  std::vector<StoreRunId> ids;
  HY_ASSIGN_OR_RETURN(out.catalog, Catalog::ScanRoot(path_, &out.nodes, &ids));
  if (!allow_other_run) {
    HY_RETURN_IF_ERROR(RefuseMixed(OneRunId(path_, ids)).status());
  }
  return out;
}

Status RunRoot::DropSteps(const std::function<bool(uint64_t step)>& which,
                          std::vector<DroppedStore>* dropped) const {
  HY_ASSIGN_OR_RETURN(std::vector<StoreLocation> stores, Stores());
  statestore::GcOptions o;
  o.counted = [](uint64_t) { return false; };  // Keep every other version.
  o.drop = [which](uint64_t v) { return which(VersionStep(v)); };
  for (const StoreLocation& where : stores) {
    Result<std::unique_ptr<statestore::Store>> store =
        OpenExistingStore(where.path, /*read_only=*/false);
    if (!store.ok()) return store.status().WithContext(where.path);
    Result<statestore::GcReport> r = (*store)->Gc(o);
    if (!r.ok()) return r.status().WithContext(where.path);
    if (!r->dropped_versions.empty() || !r->dropped_uncommitted.empty()) {
      dropped->push_back({where, *std::move(r)});
    }
  }
  return Status::OK();
}

DropTotals SumDropped(const std::vector<DroppedStore>& dropped) {
  DropTotals out;
  for (const DroppedStore& d : dropped) {
    for (const auto* list :
         {&d.report.dropped_versions, &d.report.dropped_uncommitted}) {
      for (uint64_t v : *list) out.steps.insert(VersionStep(v));
      out.versions += list->size();
    }
  }
  return out;
}

std::string JoinSteps(const std::set<uint64_t>& steps) {
  std::string out;
  for (uint64_t s : steps) out += (out.empty() ? "" : ",") + std::to_string(s);
  return out;
}

Status ExplainLockedStore(const Status& s, const std::string& path) {
  if (s.code() == StatusCode::kIOError &&
      s.message().find("lock") != std::string_view::npos) {
    return Status::FailedPrecondition(
        path + " is open in another process (a running job?): stop it first");
  }
  return s;
}

Result<std::unique_ptr<statestore::Store>> OpenExistingStore(
    const std::string& path, bool read_only) {
  statestore::StoreOptions o;
  o.read_only = read_only;
  o.create_if_missing = false;
  Result<std::unique_ptr<statestore::Store>> s =
      statestore::Store::Open(path, o);
  if (!s.ok()) return ExplainLockedStore(s.status(), path);
  return s;
}

}  // namespace hy::recovery
