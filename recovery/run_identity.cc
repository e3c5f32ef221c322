#include "hy/recovery/run_identity.h"

#include <cstdlib>
#include <ctime>
#include <random>

#include "hy/recovery/node_layout.h"
#include "hy/statestore/store.h"

namespace hy::recovery {

std::string RunIdFromEnv() {
  const char* hy = std::getenv("HY_RUN_ID");
  if (hy != nullptr && *hy != '\0') return hy;
  const char* te = std::getenv("TORCHELASTIC_RUN_ID");
  if (te != nullptr && *te != '\0' && std::string(te) != "none") return te;
  return "";
}

std::string NewRunId() {
  const std::time_t now = std::time(nullptr);
  std::tm tm;
  localtime_r(&now, &tm);
  char stamp[40];
  std::strftime(stamp, sizeof(stamp), "hy-%Y%m%d-%H%M%S-", &tm);
  std::random_device rd;
  const uint32_t r = rd();
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", r);
  return std::string(stamp) + hex;
}

Status ValidateRunId(const std::string& id) {
  bool ok = !id.empty() && id.size() <= 128;
  for (char c : id) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
  }
  if (ok) return Status::OK();
  return Status::InvalidArgument("run id '" + id +
                                 "' must be 1-128 characters of "
                                 "[A-Za-z0-9._-]");
}

Status ClaimNodeStores(const std::string& root, int node,
                       const std::string& run_id, bool allow_other_run) {
  if (run_id.empty()) return Status::OK();
  HY_ASSIGN_OR_RETURN(std::vector<StoreLocation> stores,
                      ListNodeStores(root, node));
  for (const StoreLocation& where : stores) {
    statestore::StoreOptions o;
    o.create_if_missing = false;
    o.threads = 1;
    o.run_id = run_id;
    o.allow_other_run = allow_other_run;
    HY_RETURN_IF_ERROR(statestore::Store::Open(where.path, o).status());
  }
  return Status::OK();
}

Result<std::string> RecordedRunId(const std::string& root,
                                  bool skip_unreadable) {
  HY_ASSIGN_OR_RETURN(std::vector<StoreLocation> stores, ListRootStores(root));
  std::vector<StoreRunId> ids;
  for (const StoreLocation& where : stores) {
    statestore::StoreOptions o;
    o.read_only = true;
    o.create_if_missing = false;
    o.threads = 1;
    Result<std::unique_ptr<statestore::Store>> s =
        statestore::Store::Open(where.path, o);
    if (!s.ok() && skip_unreadable) continue;
    if (!s.ok()) return s.status();
    ids.push_back({where.path, (*s)->run_id()});
  }
  return OneRunId(root, ids);
}

Result<std::string> OneRunId(const std::string& root,
                             const std::vector<StoreRunId>& ids) {
  const StoreRunId* found = nullptr;
  for (const StoreRunId& id : ids) {
    if (id.run_id.empty()) continue;
    if (found != nullptr && id.run_id != found->run_id) {
      return Status::FailedPrecondition("stores of two runs under " + root +
                                        ": " + found->path + " is run '" +
                                        found->run_id + "', " + id.path +
                                        " is run '" + id.run_id + "'");
    }
    found = &id;
  }
  return found != nullptr ? found->run_id : std::string();
}

}  // namespace hy::recovery
