// hyctl plan and reshard (see reshard_command.h).

#include "reshard_command.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_util.h"
#include "hy/reshard/layout.h"
#include "hy/reshard/plan.h"
#include "hy/reshard/shard_map.h"
#include "hy/statestore/store.h"
#include "reshard_input.h"

namespace hy::cli {
namespace {

using nlohmann::ordered_json;
using reshard::Layout;
using reshard::ModelRules;
using reshard::ModelSpec;
using reshard::ShardMap;
using statestore::Store;

struct PlanArgs {
  std::string model_spec;
  std::string store;
  std::optional<uint64_t> version;
  std::string from;
  std::string to;
  std::string rules;
  int ranks_per_node = 8;
  double bucket_mib = 64;
  std::string format;
};

struct ReshardArgs {
  std::string store;
  uint64_t version = 0;
  std::string to;
  std::string rules;
  std::optional<uint64_t> new_version;
};

std::string Human(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

Result<std::unique_ptr<Store>> OpenExisting(const std::string& path,
                                            bool read_only) {
  statestore::StoreOptions o;
  o.read_only = read_only;
  o.create_if_missing = false;
  return Store::Open(path, o);
}

Result<Layout> ParseLayout(const std::string& text, const char* flag) {
  Result<Layout> layout = Layout::Parse(text);
  if (!layout.ok()) return layout.status().WithContext(flag);
  return layout;
}

void PrintPlan(const reshard::TransferPlan& plan, const std::string& format) {
  const reshard::PlanStats& s = plan.stats;
  char fingerprint[20];
  std::snprintf(fingerprint, sizeof(fingerprint), "%016llx",
                static_cast<unsigned long long>(plan.Fingerprint()));
  if (format == "json") {
    ordered_json j{{"from", plan.src.layout().ToString()},
                   {"to", plan.dst.layout().ToString()},
                   {"world_size", plan.topology.world_size},
                   {"ranks_per_node", plan.topology.ranks_per_node},
                   {"bucket_bytes", plan.bucket_bytes},
                   {"tensors", plan.spec.tensors.size()},
                   {"model_bytes", plan.spec.TotalBytes()},
                   {"dst_bytes", s.dst_bytes},
                   {"local_bytes", s.local_bytes},
                   {"same_node_bytes", s.same_node_bytes},
                   {"cross_node_bytes", s.cross_node_bytes},
                   {"network_bytes", s.network_bytes()},
                   {"max_send_bytes", s.max_send_bytes},
                   {"max_recv_bytes", s.max_recv_bytes},
                   {"peak_staging_bytes", s.peak_staging_bytes},
                   {"steps", plan.steps.size()},
                   {"transfers", s.num_transfers},
                   {"plan_seconds", s.plan_seconds},
                   {"fingerprint", fingerprint}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "plan " << plan.src.layout().ToString() << " -> "
            << plan.dst.layout().ToString() << ": " << plan.topology.world_size
            << " ranks, " << plan.topology.ranks_per_node << " per node, "
            << plan.spec.tensors.size() << " tensors, "
            << Human(plan.spec.TotalBytes()) << " model\n";
  auto row = [](const char* what, int64_t bytes) {
    return std::vector<std::string>{what, std::to_string(bytes), Human(bytes)};
  };
  std::cout << FormatTable(
      {"BYTES", "COUNT", "HUMAN"},
      {row("destination", s.dst_bytes), row("local", s.local_bytes),
       row("same_node", s.same_node_bytes),
       row("cross_node", s.cross_node_bytes),
       row("max_send_per_rank", s.max_send_bytes),
       row("max_recv_per_rank", s.max_recv_bytes),
       row("peak_staging", s.peak_staging_bytes),
       row("bucket", plan.bucket_bytes)});
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.3f", s.plan_seconds);
  std::cout << plan.steps.size() << " steps, " << s.num_transfers
            << " transfers, planned in " << seconds << " s, fingerprint "
            << fingerprint << "\n";
}

Status RunPlan(const PlanArgs& a) {
  std::vector<TensorMeta> tensors;
  std::string recorded_rules, from = a.from;
  if (!a.model_spec.empty()) {
    HY_ASSIGN_OR_RETURN(tensors, ReadModelSpecFile(a.model_spec));
  } else {
    HY_ASSIGN_OR_RETURN(auto store, OpenExisting(a.store, true));
    HY_ASSIGN_OR_RETURN(statestore::Manifest m,
                        store->ReadManifest(*a.version));
    HY_ASSIGN_OR_RETURN(tensors, StoredTensors(store.get(), *a.version, m));
    recorded_rules = m.commit.model_rules;
    if (from.empty()) from = m.commit.layout;
  }
  if (from.empty()) {
    return Status::InvalidArgument(
        "--from is required (the version records no layout)");
  }
  HY_ASSIGN_OR_RETURN(Layout src, ParseLayout(from, "--from"));
  HY_ASSIGN_OR_RETURN(Layout dst, ParseLayout(a.to, "--to"));
  HY_ASSIGN_OR_RETURN(ModelRules rules, ChooseRules(a.rules, recorded_rules));
  HY_ASSIGN_OR_RETURN(ModelSpec spec, BuildSpec(tensors, rules));
  reshard::Topology topology;
  topology.world_size = src.world_size();
  topology.ranks_per_node = a.ranks_per_node;
  reshard::PlanOptions options;
  options.bucket_bytes =
      static_cast<int64_t>(std::llround(a.bucket_mib * (1 << 20)));
  HY_ASSIGN_OR_RETURN(reshard::TransferPlan plan,
                      reshard::Plan(src, dst, spec, topology, options));
  PrintPlan(plan, a.format);
  return Status::OK();
}

// A box shard that is not whole rows (a row-parallel TP slice) is many
// short runs; reading each alone would decode the chunks under it once per
// run. Runs in ascending order are read together as one region of at most
// this many bytes and copied out of it.
constexpr int64_t kReadWindowBytes = int64_t{64} << 20;

// Reads rank `rank`'s shard of tensor `i` under `map` from `version` into
// `out` (resized to fit).
Status ReadNewShard(Store* store, uint64_t version, const ModelSpec& spec,
                    const ShardMap& map, int rank, int i,
                    std::vector<uint8_t>* out) {
  const TensorMeta& meta = spec.tensors[i].meta;
  const std::vector<FlatRun>& runs = map.Get(rank, i).runs;
  const int64_t es = static_cast<int64_t>(DTypeSize(meta.dtype));
  out->resize(static_cast<size_t>(map.Get(rank, i).num_elements * es));
  std::vector<uint8_t> window;
  int64_t at = 0;  // Bytes of `out` filled.
  for (size_t k = 0; k < runs.size();) {
    // Runs k..j-1 lie in ascending order within one window.
    size_t j = k + 1;
    while (j < runs.size() && runs[j].offset >= runs[j - 1].end() &&
           (runs[j].end() - runs[k].offset) * es <= kReadWindowBytes) {
      ++j;
    }
    if (at + TotalLength({runs.begin() + k, runs.begin() + j}) * es >
        static_cast<int64_t>(out->size())) {
      return Status::Internal("runs of '" + meta.name + "' for rank " +
                              std::to_string(rank) + " exceed its shard");
    }
    if (j == k + 1) {
      HY_RETURN_IF_ERROR(store->ReadRegion(
          version, meta.name, runs[k],
          MutableBytes(out->data() + at, runs[k].length * es)));
      at += runs[k].length * es;
    } else {
      const FlatRun span{runs[k].offset, runs[j - 1].end() - runs[k].offset};
      window.resize(static_cast<size_t>(span.length * es));
      HY_RETURN_IF_ERROR(
          store->ReadRegion(version, meta.name, span, MutableBytes(window)));
      for (size_t r = k; r < j; ++r) {
        std::memcpy(out->data() + at,
                    window.data() + (runs[r].offset - span.offset) * es,
                    runs[r].length * es);
        at += runs[r].length * es;
      }
    }
    k = j;
  }
  if (at != static_cast<int64_t>(out->size())) {
    return Status::Internal("runs of '" + meta.name + "' for rank " +
                            std::to_string(rank) + " hold " +
                            std::to_string(at) + " bytes, not " +
                            std::to_string(out->size()));
  }
  return Status::OK();
}

// Writes every rank's part of `version` under `map`, then commits it.
// Returns the first error; the caller aborts the version.
Status SaveResharded(Store* store, const ReshardArgs& a,
                     const statestore::Manifest& source, const ModelSpec& spec,
                     const ModelRules& rules, const ShardMap& map,
                     uint64_t version, statestore::SaveStats* total) {
  // Replicated blobs (configs, metadata) carry over; per-rank ones cannot.
  std::vector<std::pair<std::string, std::string>> blobs;
  for (const auto& b : source.blobs) {
    if (b.rank != statestore::kReplicatedBlob) {
      std::cerr << "hyctl reshard: dropping rank " << b.rank << "'s blob '"
                << b.name << "' (per-rank state does not reshard)\n";
      continue;
    }
    if (b.name == kTensorOrderBlob) continue;
    HY_ASSIGN_OR_RETURN(std::string data, store->ReadBlob(a.version, b.name));
    blobs.emplace_back(b.name, std::move(data));
  }
  blobs.emplace_back(kTensorOrderBlob, TensorOrderJson(spec));

  const int n = static_cast<int>(spec.tensors.size());
  for (int rank = 0; rank < map.world_size(); ++rank) {
    // One rank's part at a time: Save takes a rank's shards all at once.
    std::vector<std::vector<uint8_t>> buffers(n);
    statestore::SavePart part;
    part.version = version;
    part.rank = rank;
    for (int i = 0; i < n; ++i) {
      const reshard::RankShard& shard = map.Get(rank, i);
      if (!shard.has_shard) continue;
      HY_RETURN_IF_ERROR(
          ReadNewShard(store, a.version, spec, map, rank, i, &buffers[i]));
      statestore::ShardData s;
      s.meta = spec.tensors[i].meta;
      s.geometry = shard.geometry;
      s.data = ConstBytes(buffers[i]);
      part.shards.push_back(std::move(s));
    }
    if (rank == 0) {
      for (const auto& [name, data] : blobs) {
        part.blobs.push_back(
            {name, statestore::kReplicatedBlob, ConstBytes(data)});
      }
    }
    statestore::SaveStats stats;
    HY_RETURN_IF_ERROR(store->Save(part, &stats));
    total->logical_bytes += stats.logical_bytes;
    total->new_bytes += stats.new_bytes;
    total->new_chunks += stats.new_chunks;
    total->chunks += stats.chunks;
  }
  statestore::CommitRecord c;
  c.version = version;
  c.step = source.commit.step;
  c.world_size = map.world_size();
  c.layout = map.layout().ToString();
  c.model_rules = rules.ToYaml();
  return store->Commit(c);
}

int RunReshard(const ReshardArgs& a) {
  auto opened = OpenExisting(a.store, /*read_only=*/false);
  if (!opened.ok()) return Report("reshard", opened.status());
  Store* store = opened->get();
  // Everything that can be wrong with the input is checked before the first
  // write.
  Result<statestore::Manifest> m = store->ReadManifest(a.version);
  if (!m.ok()) return Report("reshard", m.status());
  if (!m->commit.ranks.empty()) {
    return Report("reshard",
                  Status::FailedPrecondition(
                      "version " + std::to_string(a.version) +
                      " is a per-rank store's part of a group commit; "
                      "reshard needs a store that holds every rank"));
  }
  Result<Layout> to = ParseLayout(a.to, "--to");
  if (!to.ok()) return Report("reshard", to.status());
  Result<ModelRules> rules = ChooseRules(a.rules, m->commit.model_rules);
  if (!rules.ok()) return Report("reshard", rules.status());
  Result<std::vector<TensorMeta>> tensors = StoredTensors(store, a.version, *m);
  if (!tensors.ok()) return Report("reshard", tensors.status());
  Result<ModelSpec> spec = BuildSpec(*tensors, *rules);
  if (!spec.ok()) return Report("reshard", spec.status());
  Result<ShardMap> map = ShardMap::Build(*to, *spec);
  if (!map.ok()) return Report("reshard", map.status());

  // By default the version after every one the store knows (as import).
  Result<std::vector<statestore::VersionInfo>> known = store->ListVersions();
  if (!known.ok()) return Report("reshard", known.status());
  uint64_t version = known->empty() ? 1 : known->back().version + 1;
  if (a.new_version) {
    version = *a.new_version;
    for (const auto& v : *known) {
      if (v.version == version) {
        return Report("reshard", Status::AlreadyExists(
                                     "version " + std::to_string(version) +
                                     " exists already (pick another with "
                                     "--new-version)"));
      }
    }
  }

  statestore::SaveStats total;
  Status s = SaveResharded(store, a, *m, *spec, *rules, *map, version, &total);
  if (!s.ok()) {
    // No half-written version stays behind.
    store->Abort(version).IgnoreError();
    return Report("reshard", s);
  }
  std::cout << "resharded version " << a.version << " ("
            << (m->commit.layout.empty() ? "no layout" : m->commit.layout)
            << ", " << m->commit.world_size << " ranks) to version " << version
            << " (" << to->ToString() << ", " << to->world_size()
            << " ranks): " << spec->tensors.size() << " tensors, "
            << total.logical_bytes << " bytes in shards; wrote "
            << total.new_bytes << " new bytes (" << total.new_chunks << " of "
            << total.chunks << " chunks new)\n";
  return kExitOk;
}

}  // namespace

void AddReshardCommands(CLI::App* app, int* exit_code) {
  auto plan_args = std::make_shared<PlanArgs>();
  CLI::App* plan = app->add_subcommand(
      "plan", "Plan the transfers that change a model's layout; print totals");
  auto* spec_opt = plan->add_option(
      "--model-spec", plan_args->model_spec,
      "Tensors: a JSON array [{\"name\",\"dtype\",\"shape\"}, ...] or a "
      ".safetensors file (its header)");
  auto* store_opt = plan->add_option("--store", plan_args->store,
                                     "Take the tensors from a stored version");
  auto* version_opt = plan->add_option("--version", plan_args->version,
                                       "The version (with --store)");
  spec_opt->excludes(store_opt);
  store_opt->needs(version_opt);
  version_opt->needs(store_opt);
  plan->add_option("--from", plan_args->from,
                   "Source layout, e.g. fsdp=8 (default with --store: the "
                   "version's layout)");
  plan->add_option("--to", plan_args->to, "Destination layout, e.g. tp=2,dp=4")
      ->required();
  plan->add_option("--rules", plan_args->rules,
                   "Split rules (YAML; default: the version's recorded rules, "
                   "else the shipped Llama/Qwen2 rules)");
  plan->add_option("--ranks-per-node", plan_args->ranks_per_node,
                   "Ranks per node (rank r is on node r / N)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  plan->add_option("--bucket-mib", plan_args->bucket_mib,
                   "Most MiB a rank sends or receives per step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  AddOutputOption(plan, &plan_args->format, {"table", "json"});
  plan->callback([plan_args, exit_code] {
    if (plan_args->model_spec.empty() && plan_args->store.empty()) {
      std::cerr << "hyctl plan: give --model-spec FILE or --store STORE "
                   "--version V\n";
      *exit_code = kExitUsage;
      return;
    }
    *exit_code = Report("plan", RunPlan(*plan_args));
  });

  auto args = std::make_shared<ReshardArgs>();
  CLI::App* rs = app->add_subcommand(
      "reshard",
      "Commit a version's tensors cut for another layout as a new version");
  rs->add_option("STORE", args->store, "Store directory")->required();
  rs->add_option("--version", args->version, "Version to reshard")->required();
  rs->add_option("--to", args->to, "New layout, e.g. tp=2,dp=2")->required();
  rs->add_option("--rules", args->rules,
                 "Split rules (YAML; default: the version's recorded rules, "
                 "else the shipped Llama/Qwen2 rules)");
  rs->add_option("--new-version", args->new_version,
                 "Version number to commit (default: after every known one)")
      ->check(CLI::Range(uint64_t{1}, statestore::kMaxVersion));
  rs->callback([args, exit_code] { *exit_code = RunReshard(*args); });
}

}  // namespace hy::cli
