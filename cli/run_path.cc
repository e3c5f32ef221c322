#include "run_path.h"

#include <string>
#include <vector>

#include "hy/recovery/run_root.h"

namespace hy::cli {
namespace {

std::string Join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

}  // namespace

Status CheckImportTarget(const std::string& path) {
  constexpr const char* kInstead =
      "; import into a fresh store instead (a new directory: hyctl import "
      "NEW_STORE --safetensors FILE)";
  if (recovery::RunRoot::Is(path)) {
    return Status::InvalidArgument(
        path +
        " is a run root (node-<k>/ directories of hyctl train); a "
        "version imported there would become the run's newest and "
        "break its resume" +
        kInstead);
  }
  const std::string root = recovery::RunRoot::Enclosing(path);
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
  const std::string root = recovery::RunRoot::Enclosing(path);
  return Status::InvalidArgument(
      path + " holds " + (ranks.size() == 1 ? "rank " : "ranks ") +
      Join(ranks) + " of " + std::to_string(commit.world_size) + " of " +
      (run_id.empty() ? std::string("a run") : "run " + run_id) +
      "; pass the run root " +
      (root.empty() ? std::string("(the directory of its node-<k>/)") : root) +
      " for whole tensors");
}

}  // namespace hy::cli
