#include "version_select.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <vector>

#include "hy/statestore/store.h"

namespace hy::cli {

std::pair<std::string, std::optional<uint64_t>> ParseStateSpec(
    const std::string& spec) {
  using Spec = std::pair<std::string, std::optional<uint64_t>>;
  const size_t at = spec.rfind('@');
  if (at == std::string::npos) return Spec(spec, std::nullopt);
  uint64_t n = 0;
  const char* begin = spec.data() + at + 1;
  const char* end = spec.data() + spec.size();
  auto [ptr, ec] = std::from_chars(begin, end, n);
  if (ec != std::errc() || ptr != end || begin == end) {
    return Spec(spec, std::nullopt);  // An '@' in the path itself.
  }
  return Spec(spec.substr(0, at), n);
}

void AddVersionOptions(CLI::App* command, VersionChoice* choice,
                       const std::string& step_help) {
  CLI::Option* step = command->add_option("--step", choice->step, step_help);
  CLI::Option* id = command->add_option(
      "--version-id", choice->version_id,
      "The store's internal version id instead of a step (as -o json "
      "prints it; single stores only)");
  step->excludes(id);
  id->excludes(step);
}

Status TakePathStep(std::string* path, VersionChoice* choice) {
  auto [bare, n] = ParseStateSpec(*path);
  if (!n) return Status::OK();
  if (choice->step || choice->version_id) {
    return Status::InvalidArgument(*path + ": give the step once, as " + bare +
                                   "@N or with --step N");
  }
  *path = bare;
  choice->step = n;
  return Status::OK();
}

Result<ChosenVersion> ChooseVersion(statestore::Store* store,
                                    const VersionChoice& choice) {
  HY_ASSIGN_OR_RETURN(std::vector<statestore::VersionInfo> all,
                      store->ListVersions());
  std::optional<ChosenVersion> found;
  for (const statestore::VersionInfo& v : all) {
    if (!v.committed) continue;
    if (choice.step && v.commit.step != *choice.step) continue;
    if (choice.version_id && v.version != *choice.version_id) continue;
    if (!found || v.version > found->version) {
      found = ChosenVersion{v.version, v.commit.step};
    }
  }
  if (found) return *found;
  if (choice.step) {
    return Status::NotFound("step " + std::to_string(*choice.step) +
                            " is not committed in " + store->path());
  }
  if (choice.version_id) {
    return Status::NotFound("version id " + std::to_string(*choice.version_id) +
                            " is not committed in " + store->path());
  }
  return Status::NotFound("nothing is committed in " + store->path());
}

Status RequireStepForRunRoot(const std::string& root,
                             const VersionChoice& choice) {
  if (!choice.version_id) return Status::OK();
  return Status::InvalidArgument(
      root + " is a run root: choose its state with --step N (or " + root +
      "@N); --version-id names a version of a single store");
}

}  // namespace hy::cli
