// hyctl inspect and verify (see store_commands.h).

#include "store/store_commands.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <ctime>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli_util.h"
#include "hy/common/tensor_meta.h"
#include "hy/recovery/catalog.h"
#include "hy/recovery/node_layout.h"
#include "hy/recovery/run_root.h"
#include "hy/statestore/store.h"
#include "store/inspect_run.h"
#include "version_select.h"

namespace hy::cli {
namespace {

using nlohmann::ordered_json;
using statestore::Store;

// The paths of every store under the run root `path`, primaries and
// replicas, once they are known to belong to one run.
Result<std::vector<std::string>> RunRootStores(const std::string& path) {
  HY_ASSIGN_OR_RETURN(recovery::RunRoot root, recovery::RunRoot::Open(path));
  HY_RETURN_IF_ERROR(root.RunId().status());
  HY_ASSIGN_OR_RETURN(auto stores, root.Stores());
  std::vector<std::string> out;
  for (const auto& where : stores) out.push_back(where.path);
  return out;
}


}  // namespace

std::string Iso8601(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

std::string Ratio(uint64_t logical, uint64_t stored) {
  if (stored == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fx", double(logical) / stored);
  return buf;
}

int InspectVersions(Store* store, const std::string& format) {
  Result<std::vector<statestore::VersionInfo>> versions = store->ListVersions();
  if (!versions.ok()) return Report("inspect", versions.status());
  std::vector<std::vector<std::string>> rows;
  ordered_json out = ordered_json::array();
  for (const auto& v : *versions) {
    ordered_json j{{"version", v.version}, {"committed", v.committed}};
    if (v.committed) {
      const auto& c = v.commit;
      Result<statestore::Manifest> m = store->ReadManifest(v.version);
      if (!m.ok()) return Report("inspect", m.status());
      j.update({{"step", c.step},
                {"time", Iso8601(c.wall_time_ms)},
                {"world_size", c.world_size},
                {"layout", c.layout},
                {"tensors", m->tensors.size()},
                {"logical_bytes", c.logical_bytes},
                {"stored_bytes", c.stored_bytes},
                {"new_bytes", c.new_bytes}});
      rows.push_back({std::to_string(c.step), Iso8601(c.wall_time_ms),
                      std::to_string(c.world_size),
                      c.layout.empty() ? "-" : c.layout,
                      std::to_string(m->tensors.size()), Mb(c.logical_bytes),
                      Mb(c.stored_bytes),
                      Ratio(c.logical_bytes, c.stored_bytes), "committed"});
    } else {
      std::string ranks;
      for (int r : v.prepared)
        ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      j["prepared_ranks"] = v.prepared;
      j["aborted"] = v.aborted;
      // No commit record yet; the stores hyctl train writes carry the step
      // in the version id.
      const std::string step =
          store->run_id().empty()
              ? "-"
              : std::to_string(recovery::VersionStep(v.version));
      rows.push_back({step, "-", "-", "-", "-", "-", "-", "-",
                      v.aborted ? std::string("aborted")
                                : "uncommitted (prepared: " + ranks + ")"});
    }
    out.push_back(std::move(j));
  }
  if (format == "json") {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << FormatTable({"STEP", "TIME", "WORLD", "LAYOUT", "TENSORS",
                              "LOGICAL_MB", "STORED_MB", "RATIO", "STATE"},
                             rows);
  }
  return kExitOk;
}

int InspectVersion(Store* store, uint64_t version, const std::string& format) {
  Result<statestore::Manifest> m = store->ReadManifest(version);
  if (!m.ok()) return Report("inspect", m.status());
  std::vector<std::vector<std::string>> rows;
  ordered_json tensors = ordered_json::array();
  for (const auto& [name, t] : m->tensors) {
    ordered_json shards = ordered_json::array();
    std::map<std::string, int> encodings;
    size_t chunks = 0;
    for (const auto& s : t.shards) {
      ordered_json chunk_list = ordered_json::array();
      for (const auto& c : s.chunks) {
        ++encodings[c.encoding];
        chunk_list.push_back({{"address", c.address.ToHex()},
                              {"raw_bytes", c.raw_length},
                              {"stored_bytes", c.stored_length},
                              {"encoding", c.encoding}});
      }
      chunks += s.chunks.size();
      shards.push_back({{"rank", s.rank},
                        {"geometry", s.geometry.ToString()},
                        {"chunk_bytes", s.chunk_bytes},
                        {"chunks", std::move(chunk_list)}});
    }
    std::string enc;
    for (const auto& [e, n] : encodings) {
      enc += (enc.empty() ? "" : " ") + e + ":" + std::to_string(n);
    }
    rows.push_back({name, std::string(SafetensorsName(t.meta.dtype)),
                    ShapeString(t.meta.shape), std::to_string(t.shards.size()),
                    std::to_string(chunks), enc});
    tensors.push_back({{"name", name},
                       {"dtype", std::string(SafetensorsName(t.meta.dtype))},
                       {"shape", t.meta.shape},
                       {"shards", std::move(shards)}});
  }
  if (format == "json") {
    ordered_json blobs = ordered_json::array();
    for (const auto& b : m->blobs) {
      blobs.push_back({{"name", b.name}, {"rank", b.rank}, {"size", b.size}});
    }
    std::cout << ordered_json{{"version", version},
                              {"step", m->commit.step},
                              {"world_size", m->commit.world_size},
                              {"layout", m->commit.layout},
                              {"tensors", std::move(tensors)},
                              {"blobs", std::move(blobs)}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << FormatTable(
        {"TENSOR", "DTYPE", "SHAPE", "SHARDS", "CHUNKS", "ENCODINGS"}, rows);
  }
  return kExitOk;
}

// What Verify found in one store.
struct VerifyResult {
  ordered_json versions = ordered_json::array();
  std::vector<std::vector<std::string>> bad_rows;  // VERSION TENSOR ...
  size_t version_count = 0;
  uint64_t chunks = 0, bad = 0;
  std::map<int, uint64_t> by_format;  // Chunks read, by chunk format.
};

// {"1": n, "2": m}: chunks by chunk format version (codec.h).
ordered_json FormatCounts(const std::map<int, uint64_t>& by_format) {
  ordered_json j = ordered_json::object();
  for (const auto& [format, n] : by_format) j[std::to_string(format)] = n;
  return j;
}

Status VerifyStore(Store* store, const VersionChoice& only, VerifyResult* out) {
  std::vector<ChosenVersion> versions;
  if (only.step || only.version_id) {
    HY_ASSIGN_OR_RETURN(ChosenVersion chosen, ChooseVersion(store, only));
    versions.push_back(chosen);
  } else {
    HY_ASSIGN_OR_RETURN(std::vector<statestore::VersionInfo> all,
                        store->ListVersions());
    for (const auto& v : all) {
      if (v.committed) versions.push_back({v.version, v.commit.step});
    }
  }
  out->version_count = versions.size();
  for (const auto& [v, step] : versions) {
    HY_ASSIGN_OR_RETURN(statestore::VerifyReport r, store->Verify(v));
    out->chunks += r.chunks_checked;
    for (const auto& [format, n] : r.chunks_by_format) {
      out->by_format[format] += n;
    }
    ordered_json list = ordered_json::array();
    for (const auto& b : r.bad) {
      ++out->bad;
      out->bad_rows.push_back({std::to_string(step), b.tensor,
                               std::to_string(b.rank), std::to_string(b.index),
                               b.address.ToHex(), b.status.ToString()});
      list.push_back({{"tensor", b.tensor},
                      {"rank", b.rank},
                      {"chunk", b.index},
                      {"address", b.address.ToHex()},
                      {"error", b.status.ToString()}});
    }
    out->versions.push_back({{"version", v},
                             {"step", step},
                             {"chunks", r.chunks_checked},
                             {"bytes", r.bytes_checked},
                             {"chunks_by_format",
                              FormatCounts(r.chunks_by_format)},
                             {"bad", std::move(list)}});
  }
  return Status::OK();
}

// Verifies the store at `path`, or every store (primaries and replicas)
// under a run root.
int Verify(const std::string& path, const VersionChoice& only,
           const std::string& format) {
  std::vector<std::string> paths;
  const bool root = recovery::RunRoot::Is(path);
  if (root) {
    Result<std::vector<std::string>> all = RunRootStores(path);
    if (!all.ok()) return Report("verify", all.status());
    paths = *all;
  } else {
    paths.push_back(path);
  }
  ordered_json stores = ordered_json::array();
  std::vector<std::vector<std::string>> bad_rows;
  uint64_t bad = 0;
  // Of a run root, a store that cannot be opened or read (a truncated or
  // garbage file) is named and the others are still verified.
  std::vector<std::string> unreadable;
  for (const std::string& p : paths) {
    auto store = recovery::OpenExistingStore(p, /*read_only=*/true);
    VerifyResult r;
    Status s =
        store.ok() ? VerifyStore(store->get(), only, &r) : store.status();
    if (!s.ok() && (!root || s.IsNotFound())) {
      return Report("verify", store.ok() ? s.WithContext(p) : s);
    }
    if (!s.ok()) {
      std::cerr << "hyctl verify: " << p << ": cannot be "
                << (store.ok() ? "read" : "opened") << ": " << s.ToString()
                << "\n";
      unreadable.push_back(p);
      if (format == "json") {
        stores.push_back({{"store", p}, {"error", s.ToString()}});
      }
      continue;
    }
    bad += r.bad;
    for (auto& row : r.bad_rows) {
      if (root) row.insert(row.begin(), p);
      bad_rows.push_back(std::move(row));
    }
    if (format == "json") {
      stores.push_back({{"store", p}, {"versions", std::move(r.versions)}});
      if (!root) stores = stores[0]["versions"];
    } else if (r.bad == 0) {
      std::string formats;
      for (const auto& [format, n] : r.by_format) {
        formats += (formats.empty() ? " (" : ", ") + std::string("format ") +
                   std::to_string(format) + ": " + std::to_string(n);
      }
      if (!formats.empty()) formats += ")";
      std::cout << "ok: " << (root ? p + ": " : "") << r.version_count
                << " versions, " << r.chunks << " chunks verified" << formats
                << "\n";
    }
  }
  if (format == "json") {
    std::cout << stores.dump(2) << "\n";
  } else if (!bad_rows.empty()) {
    std::vector<std::string> header = {"STEP",  "TENSOR",  "RANK",
                                       "CHUNK", "ADDRESS", "ERROR"};
    if (root) header.insert(header.begin(), "STORE");
    std::cout << FormatTable(header, bad_rows);
  }
  if (bad > 0) std::cerr << "hyctl verify: " << bad << " bad chunks\n";
  if (!unreadable.empty()) {
    std::cerr << "hyctl verify: " << unreadable.size() << " of " << paths.size()
              << " stores could not be verified\n";
  }
  return bad > 0 || !unreadable.empty() ? kExitDataLoss : kExitOk;
}

}  // namespace

void AddStoreCommands(CLI::App* app, int* exit_code) {
  struct Args {
    std::string store;
    std::string format;
    VersionChoice at;
    bool quick = false;
  };
  auto args = std::make_shared<Args>();

  CLI::App* inspect = app->add_subcommand(
      "inspect",
      "List a store's committed steps, or one step's tensors; for a run "
      "root (node-<k>/ dirs), every step's copies per old rank and whether "
      "it is recoverable");
  inspect->add_option("STORE", args->store, "Store directory or run root")
      ->required();
  AddVersionOptions(inspect, &args->at,
                    "Show this step's tensors (run root: only this step's "
                    "versions); also STORE@STEP");
  inspect->add_flag("--quick", args->quick,
                    "Run root: list copies without reading their chunks (by "
                    "default every copy is verified and damaged ones are "
                    "flagged)");
  AddOutputOption(inspect, &args->format, {"table", "json"});
  inspect->callback([args, exit_code] {
    Status s = TakePathStep(&args->store, &args->at);
    if (s.ok() && recovery::RunRoot::Is(args->store)) {
      s = RequireStepForRunRoot(args->store, args->at);
      if (s.ok()) {
        *exit_code = InspectRunRoot(args->store, args->at.step, args->format,
                                    args->quick);
        return;
      }
    }
    if (!s.ok()) {
      *exit_code = ReportArgs("inspect", s);
      return;
    }
    auto store = recovery::OpenExistingStore(args->store, /*read_only=*/true);
    if (!store.ok()) {
      *exit_code = Report("inspect", store.status());
      return;
    }
    if (!args->at.step && !args->at.version_id) {
      *exit_code = InspectVersions(store->get(), args->format);
      return;
    }
    Result<ChosenVersion> chosen = ChooseVersion(store->get(), args->at);
    *exit_code = chosen.ok() ? InspectVersion(store->get(), chosen->version,
                                              args->format)
                             : Report("inspect", chosen.status());
  });

  CLI::App* verify = app->add_subcommand(
      "verify", "Decode and check every chunk; exit 3 on any corruption");
  verify->add_option("STORE", args->store,
                     "Store directory, or a run root (every store in it)")
      ->required();
  AddVersionOptions(verify, &args->at,
                    "Only this step (default: every committed one); also "
                    "STORE@STEP");
  AddOutputOption(verify, &args->format, {"table", "json"});
  verify->callback([args, exit_code] {
    Status s = TakePathStep(&args->store, &args->at);
    *exit_code = s.ok() ? Verify(args->store, args->at, args->format)
                        : ReportArgs("verify", s);
  });
}

}  // namespace hy::cli
