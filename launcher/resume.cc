// The supervisor's checks of a resume (supervisor.h: CheckResume,
// RollBackTo), made before anything of the run is created.

#include <cstdint>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hy/checkpoint/checkpoint.h"
#include "hy/launcher/supervisor.h"
#include "hy/recovery/node_layout.h"
#include "hy/recovery/run_root.h"

namespace hy::launcher {

Status CheckResume(const trainer::TrainConfig& c) {
  const std::string& root = c.checkpoint.store_root;
  HY_RETURN_IF_ERROR(
      recovery::RunRoot::Open(root).status().WithContext("--resume"));
  auto reader = checkpoint::CheckpointReader::Open(root);
  if (!reader.ok()) {
    if (!reader.status().IsNotFound()) return Status::OK();
    return Status::NotFound("--resume: nothing committed under " + root +
                            " to resume");
  }
  const int64_t reached = static_cast<int64_t>((*reader)->step());
  if (c.trainer.total_iterations <= reached) {
    const std::string k = std::to_string(reached);
    return Status::InvalidArgument(root + " already reached iteration " + k +
                                   "; pass --iterations > " + k +
                                   " to train further");
  }
  return Status::OK();
}

Status RollBackTo(const std::string& root, uint64_t step, bool drop_newer) {
  const std::string what = "--from-step " + std::to_string(step);
  Result<recovery::RunRoot> run = recovery::RunRoot::Open(root);
  HY_RETURN_IF_ERROR(run.status().WithContext("--resume"));
  {
    auto reader =
        checkpoint::CheckpointReader::Open(root, static_cast<int64_t>(step));
    if (!reader.ok()) return reader.status().WithContext(what);
  }  // Closed before anything is dropped.
  HY_ASSIGN_OR_RETURN(recovery::RunRootScan scan, run->Scan());
  std::set<uint64_t> newer;
  for (uint64_t s : scan.Steps()) {
    if (s > step) newer.insert(s);
  }
  if (newer.empty()) return Status::OK();
  const std::string names = recovery::JoinSteps(newer);
  if (!drop_newer) {
    return Status::InvalidArgument(
        what + ": " + root + " holds step(s) " + names +
        " after it, which a restart would go back to; add --drop-newer to "
        "remove them first (or keep them: hyctl export-hf / restore --step "
        "copy a step out)");
  }
  std::cerr << "hyctl train: " << what << ": dropping step(s) " << names
            << " from every store under " << root << "\n";
  std::vector<recovery::DroppedStore> dropped;
  const Status s =
      run->DropSteps([step](uint64_t s) { return s > step; }, &dropped);
  std::cerr << "hyctl train: " << what << ": dropped "
            << recovery::SumDropped(dropped).versions
            << " version(s) from " << dropped.size() << " store(s)\n";
  return s;
}

}  // namespace hy::launcher
