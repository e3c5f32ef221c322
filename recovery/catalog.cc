// Catalog scan, exchange and version choice (see hy/recovery/catalog.h).

#include "hy/recovery/catalog.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "hy/statestore/store.h"

namespace hy::recovery {

namespace {

using nlohmann::json;

}  // namespace

const char* CopyStateName(CopyState s) {
  switch (s) {
    case CopyState::kCommitted:
      return "committed";
    case CopyState::kPrepared:
      return "prepared";
    case CopyState::kAborted:
      return "aborted";
  }
  return "?";
}

Result<Catalog> Catalog::Scan(const std::vector<StoreLocation>& stores,
                              std::vector<StoreRunId>* run_ids) {
  Catalog out;
  for (const StoreLocation& where : stores) {
    statestore::StoreOptions o;
    o.read_only = true;
    o.create_if_missing = false;
    o.threads = 1;
    auto store = statestore::Store::Open(where.path, o);
    if (!store.ok()) {
      out.unreadable_.push_back(where.path + ": " + store.status().ToString());
      continue;
    }
    if (run_ids != nullptr)
      run_ids->push_back({where.path, (*store)->run_id()});
    auto versions = (*store)->ListVersions();
    if (!versions.ok()) {
      out.unreadable_.push_back(where.path + ": " +
                                versions.status().ToString());
      continue;
    }
    for (const statestore::VersionInfo& v : *versions) {
      CopyEntry e;
      e.where = where;
      e.version = v.version;
      if (v.committed) {
        e.state = CopyState::kCommitted;
        e.commit = v.commit;
        e.ranks = v.commit.LocalRanks();
      } else {
        e.state = v.aborted ? CopyState::kAborted : CopyState::kPrepared;
        e.ranks = v.prepared;
      }
      out.entries_.push_back(std::move(e));
    }
  }
  return out;
}

Result<Catalog> Catalog::ScanRoot(const std::string& root,
                                  std::vector<int>* nodes,
                                  std::vector<StoreRunId>* run_ids) {
  HY_ASSIGN_OR_RETURN(*nodes, ListNodes(root));
  HY_ASSIGN_OR_RETURN(std::vector<StoreLocation> stores, ListRootStores(root));
  return Scan(stores, run_ids);
}

std::string Catalog::Encode() const {
  json entries = json::array();
  for (const CopyEntry& e : entries_) {
    entries.push_back({{"node", e.where.node},
                       {"source_node", e.where.source_node},
                       {"slot", e.where.slot},
                       {"replica", e.where.replica},
                       {"path", e.where.path},
                       {"version", e.version},
                       {"state", CopyStateName(e.state)},
                       {"ranks", e.ranks},
                       {"commit", e.state == CopyState::kCommitted
                                      ? statestore::EncodeCommitRecord(e.commit)
                                      : std::string()}});
  }
  return json{{"entries", entries}, {"unreadable", unreadable_}}.dump();
}

Result<Catalog> Catalog::Decode(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::DataLoss("catalog is not JSON");
  Catalog out;
  try {
    for (const json& e : j.at("entries")) {
      CopyEntry c;
      c.where.node = e.at("node").get<int>();
      c.where.source_node = e.at("source_node").get<int>();
      c.where.slot = e.at("slot").get<int>();
      c.where.replica = e.at("replica").get<bool>();
      c.where.path = e.at("path").get<std::string>();
      c.version = e.at("version").get<uint64_t>();
      const std::string state = e.at("state").get<std::string>();
      c.state = state == "committed" ? CopyState::kCommitted
                : state == "aborted" ? CopyState::kAborted
                                     : CopyState::kPrepared;
      c.ranks = e.at("ranks").get<std::vector<int>>();
      if (c.state == CopyState::kCommitted) {
        HY_ASSIGN_OR_RETURN(c.commit, statestore::DecodeCommitRecord(
                                          e.at("commit").get<std::string>()));
      }
      out.entries_.push_back(std::move(c));
    }
    out.unreadable_ = j.at("unreadable").get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    return Status::DataLoss(std::string("catalog: ") + e.what());
  }
  return out;
}

void Catalog::Merge(const Catalog& other) {
  entries_.insert(entries_.end(), other.entries_.begin(), other.entries_.end());
  unreadable_.insert(unreadable_.end(), other.unreadable_.begin(),
                     other.unreadable_.end());
}

const statestore::CommitRecord* Catalog::FindCommit(uint64_t version) const {
  for (const CopyEntry& e : entries_) {
    if (e.version == version && e.state == CopyState::kCommitted) {
      return &e.commit;
    }
  }
  return nullptr;
}

uint32_t Catalog::NextGeneration() const {
  uint32_t next = 0;
  for (const CopyEntry& e : entries_) {
    next = std::max(next, VersionGeneration(e.version) + 1);
  }
  return std::min(next, kMaxGeneration);
}

std::string DescribeCopy(const CopyEntry& c) {
  const std::string slot =
      c.where.slot == 0 ? "" : " (slot " + std::to_string(c.where.slot) + ")";
  if (c.where.replica) {
    return "replica of node " + std::to_string(c.where.source_node) + slot +
           " on node " + std::to_string(c.where.node);
  }
  return "primary on node " + std::to_string(c.where.node) + slot;
}

std::string CopyKey(const CopyEntry& copy, int rank) {
  return copy.where.path + "#" + std::to_string(copy.version) + "#" +
         std::to_string(rank);
}

Result<Choice> ChooseVersion(const Catalog& catalog,
                             const std::vector<int>& live_nodes,
                             const std::set<std::string>& bad, int64_t step,
                             int64_t generation) {
  std::map<uint64_t, const statestore::CommitRecord*, std::greater<>> committed;
  for (const CopyEntry& e : catalog.entries()) {
    if (e.state != CopyState::kCommitted) continue;
    if (step >= 0 && e.commit.step != static_cast<uint64_t>(step)) continue;
    if (generation >= 0 && VersionGeneration(e.version) != generation) {
      continue;
    }
    committed.emplace(e.version, &e.commit);
  }
  if (committed.empty()) {
    return Status::NotFound(step >= 0 ? "step " + std::to_string(step) +
                                            " is committed in no store"
                                      : "no store holds a committed version");
  }
  auto rank_of = [&](const CopyEntry& c) {
    const bool live =
        std::count(live_nodes.begin(), live_nodes.end(), c.where.node) > 0;
    // Committed copies first (a prepared one needs settling by its owner).
    return (c.state == CopyState::kCommitted ? 0 : 4) + (live ? 0 : 2) +
           (c.where.replica ? 1 : 0);
  };
  std::vector<std::string> notes;
  std::string first_failure;
  for (const auto& [version, commit] : committed) {
    const int world = commit->world_size;
    std::vector<std::vector<const CopyEntry*>> copies(world);
    for (const CopyEntry& e : catalog.entries()) {
      if (e.version != version || e.state == CopyState::kAborted) continue;
      for (int r : e.ranks) {
        if (r < 0 || r >= world || bad.count(CopyKey(e, r)) > 0) continue;
        copies[r].push_back(&e);
      }
    }
    std::string missing;
    Choice choice;
    choice.version = version;
    choice.commit = *commit;
    for (int r = 0; r < world; ++r) {
      std::stable_sort(copies[r].begin(), copies[r].end(),
                       [&](const CopyEntry* a, const CopyEntry* b) {
                         return rank_of(*a) < rank_of(*b);
                       });
      if (copies[r].empty()) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        continue;
      }
      choice.source.push_back(*copies[r][0]);
    }
    if (missing.empty()) {
      choice.notes = std::move(notes);
      for (int r = 0; r < world; ++r) {
        choice.notes.push_back("old rank " + std::to_string(r) + ": " +
                               DescribeCopy(choice.source[r]) + " (" +
                               std::to_string(copies[r].size()) +
                               " usable cop" +
                               (copies[r].size() == 1 ? "y" : "ies") + ")");
      }
      return choice;
    }
    const std::string why = "step " + std::to_string(commit->step) +
                            " (version " + std::to_string(version) +
                            "): every copy of old rank(s) " + missing +
                            " is lost or bad";
    notes.push_back("passed over " + why);
    if (first_failure.empty()) first_failure = why;
  }
  return Status::DataLoss("no committed version is recoverable: newest " +
                          first_failure +
                          " (and every older one lacks a "
                          "part as well)");
}

}  // namespace hy::recovery
