// Two-phase commit across per-rank stores (see group_commit.h).

#include "hy/statestore/group_commit.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <thread>

namespace hy::statestore {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kPollInterval(20);

Result<VersionInfo> Lookup(Store* store, uint64_t version);

// A read-only follower of a store another process writes, with its own
// scratch folder for RocksDB's secondary-instance logs.
class Follower {
 public:
  ~Follower() {
    store_.reset();
    std::error_code ec;
    if (!scratch_.empty()) fs::remove_all(scratch_, ec);
  }

  // Returns the store's open error (e.g. NotFound before it exists).
  Status Open(const std::string& path) {
    if (store_) return Status::OK();
    if (scratch_.empty()) {
      std::string tmpl =
          (fs::temp_directory_path() / "hy-follow-XXXXXX").string();
      if (mkdtemp(tmpl.data()) == nullptr) {
        return Status::IOError("cannot create a folder for a store follower");
      }
      scratch_ = tmpl;
    }
    StoreOptions o;
    o.read_only = true;
    o.secondary_path = scratch_;
    o.threads = 1;
    Result<std::unique_ptr<Store>> s = Store::Open(path, o);
    if (!s.ok()) return s.status();
    store_ = std::move(s).value();
    return Status::OK();
  }
  // Opens the store if needed, catches up, and finds `version` in it.
  // A store another process is writing can be caught mid-change (its
  // MANIFEST rolling over, say), so any error closes the follower: the next
  // poll opens it afresh. Returns NotFound while the store does not exist.
  Result<VersionInfo> Poll(const std::string& path, uint64_t version) {
    Status s = Open(path);
    if (!s.ok()) return s;
    Result<VersionInfo> v = Lookup(store_.get(), version);
    if (!v.ok()) store_.reset();
    return v;
  }

 private:
  std::string scratch_;
  std::unique_ptr<Store> store_;
};

// Finds `version` in `store` (after catching up).
Result<VersionInfo> Lookup(Store* store, uint64_t version) {
  HY_RETURN_IF_ERROR(store->Refresh());
  HY_ASSIGN_OR_RETURN(std::vector<VersionInfo> versions, store->ListVersions());
  for (VersionInfo& v : versions) {
    if (v.version == version) return v;
  }
  VersionInfo none;
  none.version = version;
  return none;
}

}  // namespace

Status CommitAcrossStores(Store* own, const CommitRecord& commit,
                          const std::vector<PeerStore>& peers,
                          std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::vector<Follower> followers(peers.size());
  std::vector<bool> prepared(peers.size(), false);
  Status last_error;  // The latest transient error, for the timeout message.
  for (;;) {
    std::string missing;
    for (size_t i = 0; i < peers.size(); ++i) {
      if (prepared[i]) continue;
      Result<VersionInfo> v = followers[i].Poll(peers[i].path, commit.version);
      if (v.ok()) {
        prepared[i] = std::count(v->prepared.begin(), v->prepared.end(),
                                 peers[i].rank) > 0;
      } else if (!v.status().IsNotFound()) {
        last_error = v.status().WithContext("following " + peers[i].path);
      }
      if (!prepared[i]) {
        missing += (missing.empty() ? "" : ",") + std::to_string(peers[i].rank);
      }
    }
    if (missing.empty()) break;
    if (Clock::now() >= deadline) {
      // The decision is abort; recording it lets the followers, and their
      // Gc, know the outcome.
      HY_RETURN_IF_ERROR(own->Abort(commit.version));
      return Status::Unavailable(
          "aborted version " + std::to_string(commit.version) + ": ranks " +
          missing + " did not prepare it within " +
          std::to_string(timeout.count()) + " ms" +
          (last_error.ok() ? std::string()
                           : " (last error: " + last_error.ToString() + ")"));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  return own->Commit(commit);
}

Status FollowCommit(Store* own, int own_rank,
                    const std::string& coordinator_path, uint64_t version,
                    std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  {
    // Already done (a restarted follower calls again): nothing to do.
    HY_ASSIGN_OR_RETURN(VersionInfo mine, Lookup(own, version));
    if (mine.committed) return Status::OK();
  }
  Follower coordinator;
  Status last_error;  // The latest transient error, for the timeout message.
  for (;;) {
    Result<VersionInfo> v = coordinator.Poll(coordinator_path, version);
    if (v.ok()) {
      if (v->committed) {
        CommitRecord mine = v->commit;
        mine.ranks = {own_rank};
        return own->Commit(mine);
      }
      if (v->aborted) {
        HY_RETURN_IF_ERROR(own->Abort(version));
        return Status::Aborted("the coordinator aborted version " +
                               std::to_string(version));
      }
    } else if (!v.status().IsNotFound()) {
      last_error = v.status().WithContext("following " + coordinator_path);
    }
    if (Clock::now() >= deadline) {
      return Status::Unavailable(
          "the coordinator did not commit version " + std::to_string(version) +
          " within " + std::to_string(timeout.count()) + " ms" +
          (last_error.ok() ? std::string()
                           : " (last error: " + last_error.ToString() + ")"));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace hy::statestore
