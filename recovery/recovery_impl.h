// Internal to Recovery: its state between Open and Fetch, and the small
// collective helpers recovery.cc (scan, settle, choose) and fetch.cc share.
//
// Thread-safety: as Recovery (one thread per rank).

#ifndef HY_RECOVERY_RECOVERY_IMPL_H_
#define HY_RECOVERY_RECOVERY_IMPL_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hy/recovery/recovery.h"
#include "hy/statestore/store.h"

namespace hy::recovery {

namespace internal {

using Clock = std::chrono::steady_clock;

inline double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Collective: every rank's `mine`; a failure on any rank is returned on all.
Result<std::vector<std::string>> GatherStrings(reshard::Transport* t,
                                               const std::string& mine);

// Collective: OK on every rank only if OK on every rank (the first other
// rank's error otherwise, as DataLoss naming it).
Status AgreeOnStatus(reshard::Transport* t, const Status& mine);

}  // namespace internal

struct Recovery::Impl {
  reshard::Transport* transport = nullptr;
  RecoveryOptions options;
  Catalog local;
  Catalog global;
  bool has_state = false;
  Choice choice;
  std::vector<int> server;  // Index: old rank; the new rank serving it.
  RecoveryStats stats;
  std::map<std::string, std::unique_ptr<statestore::Store>> open;  // By path.

  int rank() const { return transport->rank(); }
  void Log(const std::string& line) const {
    if (options.log) options.log(line);
  }
  Status Scan();
  Status Settle();
  Status ChooseAndVerify();
  Result<statestore::Store*> StoreAt(const std::string& path);
};

}  // namespace hy::recovery

#endif  // HY_RECOVERY_RECOVERY_IMPL_H_
