#include "run_path.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "hy/recovery/run_identity.h"
#include "restore_command.h"

namespace hy::cli {
namespace {

namespace fs = std::filesystem;

bool IsNodeDirName(const std::string& name) {
  constexpr std::string_view kPrefix = "node-";
  return name.size() > kPrefix.size() && name.rfind(kPrefix, 0) == 0 &&
         std::all_of(name.begin() + kPrefix.size(), name.end(),
                     [](unsigned char c) { return std::isdigit(c); });
}

// The run root that a store at `path` (<root>/node-<k>/<store>) lies in,
// or "" when its directory is not a node's.
std::string EnclosingRunRoot(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // A trailing '/'.
  if (!IsNodeDirName(p.parent_path().filename().string())) return "";
  const fs::path root = p.parent_path().parent_path();
  return root.empty() ? "." : root.string();
}

std::string Join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

}  // namespace

Status CheckRunRoot(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::NotFound(path + " does not exist");
  if (IsRunRoot(path)) return Status::OK();
  if (fs::exists(fs::path(path) / "CURRENT", ec)) {  // A RocksDB: a store.
    const std::string root = EnclosingRunRoot(path);
    return Status::InvalidArgument(
        path + " is a single store, not a run root" +
        (root.empty() ? std::string(" (the directory of node-<k>/ "
                                    "directories that hyctl train writes)")
                      : "; pass the run root " + root + " that holds it"));
  }
  return Status::NotFound(path +
                          " is not a run root (it holds no node-<k> "
                          "directory)");
}

Status CheckOneRun(const std::string& root) {
  Result<std::string> run =
      recovery::RecordedRunId(root, /*skip_unreadable=*/true);
  if (run.status().code() != StatusCode::kFailedPrecondition) {
    return run.status();
  }
  return Status::FailedPrecondition(
      std::string(run.status().message()) +
      ": refusing to treat them as one run; move the other run's node "
      "directories out of " +
      root);
}

Status CheckImportTarget(const std::string& path) {
  constexpr const char* kInstead =
      "; import into a fresh store instead (a new directory: hyctl import "
      "NEW_STORE --safetensors FILE)";
  if (IsRunRoot(path)) {
    return Status::InvalidArgument(
        path +
        " is a run root (node-<k>/ directories of hyctl train); a "
        "version imported there would become the run's newest and "
        "break its resume" +
        kInstead);
  }
  const std::string root = EnclosingRunRoot(path);
  if (root.empty()) return Status::OK();
  return Status::InvalidArgument(
      path + " is a store of the run under " + root +
      " (one rank's part of each step, committed together with the others); "
      "a version imported into it would become the run's newest and break "
      "its resume" +
      kInstead);
}

Status ImportIntoRunStore(const std::string& path, const std::string& run_id) {
  return Status::InvalidArgument(
      path + " belongs to run '" + run_id +
      "' (a store hyctl train wrote); a version imported into it would "
      "become the run's newest and break its resume; import into a fresh "
      "store instead (a new directory: hyctl import NEW_STORE --safetensors "
      "FILE)");
}

Status CheckWholeStore(const std::string& path,
                       const statestore::CommitRecord& commit,
                       const std::string& run_id) {
  const std::vector<int> ranks = commit.LocalRanks();
  if (static_cast<int>(ranks.size()) >= commit.world_size) return Status::OK();
  const std::string root = EnclosingRunRoot(path);
  return Status::InvalidArgument(
      path + " holds " + (ranks.size() == 1 ? "rank " : "ranks ") +
      Join(ranks) + " of " + std::to_string(commit.world_size) + " of " +
      (run_id.empty() ? std::string("a run") : "run " + run_id) +
      "; pass the run root " +
      (root.empty() ? std::string("(the directory of its node-<k>/)") : root) +
      " for whole tensors");
}

Status ExplainLocked(const Status& s, const std::string& path) {
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
  if (!s.ok()) return ExplainLocked(s.status(), path);
  return s;
}

}  // namespace hy::cli
