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
#include "hy/reshard/stored_version.h"
#include "hy/statestore/store.h"
#include "reshard_input.h"
#include "run_path.h"

namespace hy::cli {
namespace {

using nlohmann::ordered_json;
using reshard::Layout;
using reshard::ModelRules;
using reshard::ModelSpec;
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
    HY_ASSIGN_OR_RETURN(auto store, OpenExistingStore(a.store, true));
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

int RunReshard(const ReshardArgs& a) {
  auto opened = OpenExistingStore(a.store, /*read_only=*/false);
  if (!opened.ok()) return Report("reshard", opened.status());
  Result<Layout> to = ParseLayout(a.to, "--to");
  if (!to.ok()) return Report("reshard", to.status());
  std::optional<ModelRules> rules;
  if (!a.rules.empty()) {
    Result<ModelRules> r = ChooseRules(a.rules, "");
    if (!r.ok()) return Report("reshard", r.status());
    rules = std::move(r).value();
  }
  Result<reshard::ReshardedVersion> done = reshard::ReshardStoredVersion(
      opened->get(), a.version, *to, rules ? &*rules : nullptr, a.new_version);
  if (!done.ok()) return Report("reshard", done.status());
  for (const std::string& blob : done->dropped_blobs) {
    std::cerr << "hyctl reshard: dropping " << blob
              << " (per-rank state does not reshard)\n";
  }
  const statestore::SaveStats& total = done->stats;
  std::cout << "resharded version " << a.version << " ("
            << (done->from.empty() ? "no layout" : done->from) << ", "
            << done->from_world << " ranks) to version " << done->version
            << " (" << to->ToString() << ", " << to->world_size()
            << " ranks): " << done->tensors << " tensors, "
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
