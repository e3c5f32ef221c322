// Two-phase commit over a transport (see hy/recovery/transport_commit.h).

#include "hy/recovery/transport_commit.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hy/common/crash_point.h"

namespace hy::recovery {

namespace {

using nlohmann::json;

// Every rank's `mine`, parsed.
Result<std::vector<json>> GatherJson(reshard::Transport* t, const json& mine) {
  const std::string text = mine.dump();
  std::vector<std::vector<uint8_t>> all;
  HY_RETURN_IF_ERROR(t->AllGatherV(ConstBytes(text), &all));
  std::vector<json> out;
  for (const auto& a : all) {
    json j = json::parse(std::string(a.begin(), a.end()), nullptr, false);
    if (!j.is_object()) return Status::DataLoss("commit message garbled");
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

Status CommitOverTransport(reshard::Transport* transport,
                           statestore::Store* own,
                           statestore::CommitRecord commit,
                           const Status& prepared,
                           const statestore::SaveStats& stats) {
  const int rank = transport->rank();
  const int64_t step = static_cast<int64_t>(commit.step);
  if (prepared.ok()) CrashPoint("commit.prepared", rank, step);
  // Phase 1: who prepared.
  HY_ASSIGN_OR_RETURN(
      std::vector<json> outcomes,
      GatherJson(transport,
                 {{"error", prepared.ok() ? "" : prepared.ToString()},
                  {"logical", stats.logical_bytes},
                  {"stored", stats.stored_bytes},
                  {"new", stats.new_bytes}}));
  std::string failed;
  uint64_t logical = 0, stored = 0, fresh = 0;
  for (size_t r = 0; r < outcomes.size(); ++r) {
    const std::string error = outcomes[r].value("error", "");
    if (!error.empty()) {
      failed += (failed.empty() ? "" : "; ") + std::string("rank ") +
                std::to_string(r) + ": " + error;
    }
    logical += outcomes[r].value("logical", uint64_t{0});
    stored += outcomes[r].value("stored", uint64_t{0});
    fresh += outcomes[r].value("new", uint64_t{0});
  }
  commit.logical_bytes = logical;
  commit.stored_bytes = stored;
  commit.new_bytes = fresh;
  // Phase 2: rank 0 decides in its own store.
  json decision;
  if (rank == 0) {
    commit.ranks = {0};
    Status s = failed.empty()
                   ? own->Commit(commit)
                   : Status::Aborted("not every rank prepared: " + failed);
    if (s.code() == StatusCode::kAlreadyExists) s = Status::OK();
    if (s.ok()) CrashPoint("commit.decided", rank, step);
    // No commit record written: record the abort, the decision readers see.
    if (!s.ok()) own->Abort(commit.version).IgnoreError();
    decision = {{"commit", s.ok()},
                {"why", s.ok() ? "" : s.ToString()},
                {"record", statestore::EncodeCommitRecord(commit)}};
  } else {
    decision = {{"commit", false}};
  }
  HY_ASSIGN_OR_RETURN(std::vector<json> all, GatherJson(transport, decision));
  const json& d = all[0];
  if (!d.value("commit", false)) {
    if (rank != 0 && prepared.ok()) own->Abort(commit.version).IgnoreError();
    return Status::Aborted("version " + std::to_string(commit.version) +
                           " aborted by rank 0: " + d.value("why", ""));
  }
  if (rank == 0) return Status::OK();
  HY_ASSIGN_OR_RETURN(
      statestore::CommitRecord decided,
      statestore::DecodeCommitRecord(d.value("record", std::string())));
  decided.ranks = {rank};
  CrashPoint("commit.before_follow", rank, step);
  Status s = own->Commit(decided);
  if (s.code() == StatusCode::kAlreadyExists) s = Status::OK();
  if (s.ok()) CrashPoint("commit.followed", rank, step);
  return s;
}

}  // namespace hy::recovery
