// hyctl plan and reshard (see reshard_command.h).

#include "layout/reshard_command.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_util.h"
#include "hy/checkpoint/checkpoint.h"
#include "hy/recovery/run_root.h"
#include "hy/reshard/layout.h"
#include "hy/reshard/plan.h"
#include "hy/reshard/shard_map.h"
#include "hy/reshard/stored_version.h"
#include "hy/statestore/store.h"
#include "layout/reshard_input.h"
#include "layout/reshard_run.h"
#include "layout/run_models.h"
#include "version_select.h"

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
  VersionChoice at;
  std::string from;
  std::string to;
  std::string rules;
  int ranks_per_node = 8;
  double bucket_mib = 64;
  std::string format;
};

struct ReshardArgs {
  std::string path;
  VersionChoice at;
  std::string to;
  std::string out;
  std::string rules;
  std::optional<uint64_t> new_version;
  bool allow_other_run = false;
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

ordered_json PlanJson(const reshard::TransferPlan& plan) {
  const reshard::PlanStats& s = plan.stats;
  char fingerprint[20];
  std::snprintf(fingerprint, sizeof(fingerprint), "%016llx",
                static_cast<unsigned long long>(plan.Fingerprint()));
  return ordered_json{{"from", plan.src.layout().ToString()},
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
}

void PrintPlanTable(const reshard::TransferPlan& plan) {
  const reshard::PlanStats& s = plan.stats;
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
  const std::string fingerprint = PlanJson(plan)["fingerprint"];
  std::cout << plan.steps.size() << " steps, " << s.num_transfers
            << " transfers, planned in " << seconds << " s, fingerprint "
            << fingerprint << "\n";
}

// One plan per model: a run root's buffers (run_models.h) move one after
// another, each cut on its own; a spec file or store is one model ("").
void PrintPlans(
    const std::vector<std::pair<std::string, reshard::TransferPlan>>& plans,
    const std::string& format) {
  if (plans.size() == 1 && plans[0].first.empty()) {
    if (format == "json") {
      std::cout << PlanJson(plans[0].second).dump(2) << "\n";
    } else {
      PrintPlanTable(plans[0].second);
    }
    return;
  }
  int64_t network = 0, dst = 0, transfers = 0;
  size_t steps = 0;
  ordered_json models = ordered_json::array();
  for (const auto& [prefix, plan] : plans) {
    network += plan.stats.network_bytes();
    dst += plan.stats.dst_bytes;
    transfers += plan.stats.num_transfers;
    steps += plan.steps.size();
    ordered_json j = PlanJson(plan);
    j["model"] = prefix;
    models.push_back(std::move(j));
    if (format != "json") {
      std::cout << prefix << "\n";
      PrintPlanTable(plan);
      std::cout << "\n";
    }
  }
  if (format == "json") {
    ordered_json j{{"models", std::move(models)},
                   {"total",
                    {{"dst_bytes", dst},
                     {"network_bytes", network},
                     {"steps", steps},
                     {"transfers", transfers}}}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "total over " << plans.size() << " models: " << Human(dst)
            << " at the destination, " << Human(network) << " over the "
            << "network, " << steps << " steps, " << transfers
            << " transfers\n";
}

// The layout a version records, as the planner takes it: hyctl import's
// per-tensor cut "flat=1" is one rank holding everything (dp=1); "flat=K"
// for K > 1 is no layout the planner models.
Result<std::string> RecordedLayout(const std::string& recorded) {
  if (recorded.rfind("flat=", 0) != 0) return recorded;
  if (recorded == "flat=1") return std::string("dp=1");
  return Status::InvalidArgument(
      "the version records layout " + recorded +
      " (hyctl import --shards cut each tensor on its own), which the "
      "planner does not model; pass --from, or reshard it first "
      "(hyctl reshard STORE --to fsdp=N)");
}

Status RunPlan(PlanArgs a) {
  std::vector<std::pair<std::string, ModelSpec>> models;
  std::string recorded_rules, from = a.from;
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  if (!a.model_spec.empty()) {
    HY_ASSIGN_OR_RETURN(std::vector<TensorMeta> tensors,
                        ReadModelSpecFile(a.model_spec));
    HY_ASSIGN_OR_RETURN(ModelRules rules, ChooseRules(a.rules, ""));
    HY_ASSIGN_OR_RETURN(ModelSpec spec, BuildSpec(tensors, rules));
    models.emplace_back("", std::move(spec));
  } else {
    HY_RETURN_IF_ERROR(TakePathStep(&a.store, &a.at));
    if (recovery::RunRoot::Is(a.store)) {
      HY_RETURN_IF_ERROR(RequireStepForRunRoot(a.store, a.at));
      HY_ASSIGN_OR_RETURN(
          reader,
          checkpoint::CheckpointReader::Open(
              a.store, a.at.step ? static_cast<int64_t>(*a.at.step) : -1));
      if (from.empty()) from = reader->commit().layout;
      HY_ASSIGN_OR_RETURN(std::vector<RunModel> run,
                          RunModelsOf(reader.get(), a.rules));
      for (RunModel& m : run) models.emplace_back(m.prefix, std::move(m.spec));
    } else {
      HY_ASSIGN_OR_RETURN(auto store, recovery::OpenExistingStore(a.store, true));
      HY_ASSIGN_OR_RETURN(ChosenVersion v, ChooseVersion(store.get(), a.at));
      HY_ASSIGN_OR_RETURN(statestore::Manifest m,
                          store->ReadManifest(v.version));
      HY_ASSIGN_OR_RETURN(std::vector<TensorMeta> tensors,
                          StoredTensors(store.get(), v.version, m));
      HY_ASSIGN_OR_RETURN(ModelRules rules,
                          ChooseRules(a.rules, m.commit.model_rules));
      HY_ASSIGN_OR_RETURN(ModelSpec spec, BuildSpec(tensors, rules));
      models.emplace_back("", std::move(spec));
      if (from.empty() && !m.commit.layout.empty()) {
        HY_ASSIGN_OR_RETURN(from, RecordedLayout(m.commit.layout));
      }
    }
  }
  if (from.empty()) {
    return Status::InvalidArgument(
        "--from is required (the version records no layout)");
  }
  HY_ASSIGN_OR_RETURN(Layout src, ParseLayout(from, "--from"));
  HY_ASSIGN_OR_RETURN(Layout dst, ParseLayout(a.to, "--to"));
  reshard::Topology topology;
  topology.world_size = std::max(src.world_size(), dst.world_size());
  topology.ranks_per_node = a.ranks_per_node;
  reshard::PlanOptions options;
  options.bucket_bytes =
      static_cast<int64_t>(std::llround(a.bucket_mib * (1 << 20)));
  std::vector<std::pair<std::string, reshard::TransferPlan>> plans;
  for (const auto& [prefix, spec] : models) {
    Result<reshard::TransferPlan> plan =
        reshard::Plan(src, dst, spec, topology, options);
    if (!plan.ok()) {
      return prefix.empty() ? plan.status()
                            : plan.status().WithContext("tensors " + prefix);
    }
    plans.emplace_back(prefix, std::move(plan).value());
  }
  PrintPlans(plans, a.format);
  return Status::OK();
}

// "tp=2,dp=2" as "tp2-dp2", for a default directory name.
std::string LayoutSlug(const Layout& layout) {
  std::string slug;
  for (char c : layout.ToString()) {
    if (c == ',') {
      slug += '-';
    } else if (c != '=') {
      slug += c == ':' ? '.' : c;
    }
  }
  return slug;
}

int ReshardRun(const ReshardArgs& a, const Layout& to) {
  if (a.new_version) {
    return ReportArgs("reshard", Status::InvalidArgument(
                                     "--new-version: a run root's new copy "
                                     "keeps the step's version"));
  }
  if (Status s = RequireStepForRunRoot(a.path, a.at); !s.ok()) {
    return ReportArgs("reshard", s);
  }
  RunReshardOptions o;
  o.root = a.path;
  o.step = a.at.step ? static_cast<int64_t>(*a.at.step) : -1;
  o.to = to;
  std::string root = a.path;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  o.out = a.out.empty() ? root + "-" + LayoutSlug(to) : a.out;
  o.rules = a.rules;
  o.allow_other_run = a.allow_other_run;
  Result<RunReshardResult> done = ReshardRunRoot(o);
  if (!done.ok()) return ReportArgs("reshard", done.status());
  for (const std::string& note : done->notes) {
    std::cerr << "hyctl reshard: " << note << "\n";
  }
  std::cout << "resharded step " << done->step << " of " << a.path << " ("
            << (done->from.empty() ? "no layout" : done->from) << ", "
            << done->from_world << " ranks) to " << to.ToString() << " ("
            << to.world_size() << " ranks) in " << o.out << ": "
            << done->tensors << " tensors, " << done->bytes
            << " bytes; resume it with hyctl train --resume " << o.out << "\n";
  return kExitOk;
}

int RunReshard(ReshardArgs a) {
  if (Status s = TakePathStep(&a.path, &a.at); !s.ok()) {
    return ReportArgs("reshard", s);
  }
  Result<Layout> to = ParseLayout(a.to, "--to");
  if (!to.ok()) return ReportArgs("reshard", to.status());
  const Status kind = recovery::RunRoot::Open(a.path).status();
  if (kind.ok()) return ReshardRun(a, *to);
  if (!kind.IsInvalidArgument()) return ReportArgs("reshard", kind);
  if (!a.out.empty() || a.allow_other_run) {
    return ReportArgs("reshard",
                      Status::InvalidArgument(
                          a.path + " is a single store: --out and "
                                   "--allow-other-run are for a run root (the "
                                   "new version goes into the same store)"));
  }
  auto opened = recovery::OpenExistingStore(a.path, /*read_only=*/false);
  if (!opened.ok()) return Report("reshard", opened.status());
  Result<ChosenVersion> from = ChooseVersion(opened->get(), a.at);
  if (!from.ok()) return Report("reshard", from.status());
  std::optional<ModelRules> rules;
  if (!a.rules.empty()) {
    Result<ModelRules> r = ChooseRules(a.rules, "");
    if (!r.ok()) return Report("reshard", r.status());
    rules = std::move(r).value();
  }
  Result<reshard::ReshardedVersion> done =
      reshard::ReshardStoredVersion(opened->get(), from->version, *to,
                                    rules ? &*rules : nullptr, a.new_version);
  if (!done.ok()) return Report("reshard", ExplainUnmatched(done.status()));
  for (const std::string& blob : done->dropped_blobs) {
    std::cerr << "hyctl reshard: dropping " << blob
              << " (per-rank state does not reshard)\n";
  }
  const statestore::SaveStats& total = done->stats;
  std::cout << "resharded step " << from->step << " (version " << from->version
            << ", " << (done->from.empty() ? "no layout" : done->from) << ", "
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
  auto* store_opt = plan->add_option(
      "--store", plan_args->store,
      "Take the tensors from a step of a store or a run root (hyctl "
      "train's: every model, parameters and optimizer state); STORE@STEP "
      "picks a step");
  AddVersionOptions(plan, &plan_args->at,
                    "Step of --store (default: the newest)");
  spec_opt->excludes(store_opt);
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
      std::cerr << "hyctl plan: give --model-spec FILE or --store PATH\n";
      *exit_code = kExitUsage;
      return;
    }
    if (plan_args->model_spec.size() &&
        (plan_args->at.step || plan_args->at.version_id)) {
      std::cerr << "hyctl plan: --step and --version-id go with --store\n";
      *exit_code = kExitUsage;
      return;
    }
    *exit_code = ReportArgs("plan", RunPlan(*plan_args));
  });

  auto args = std::make_shared<ReshardArgs>();
  CLI::App* rs = app->add_subcommand(
      "reshard",
      "Cut a step for another layout: a run root into a new run root, a "
      "store's version into a new version of the store");
  rs->add_option("PATH", args->path,
                 "A run root (hyctl train) or a store; PATH@STEP picks a step")
      ->required();
  AddVersionOptions(rs, &args->at, "Step to reshard (default: the newest)");
  rs->add_option("--to", args->to, "New layout, e.g. fsdp=4 or tp=2,dp=2")
      ->required();
  rs->add_option("--out", args->out,
                 "Run root: the new run root to write (must not exist; "
                 "default: PATH-<layout>, e.g. run-tp2-dp2)");
  rs->add_option("--rules", args->rules,
                 "Split rules (YAML; default: the step's recorded rules, "
                 "else the shipped Llama/Qwen2 rules)");
  rs->add_option("--new-version", args->new_version,
                 "Store: version id to commit (default: after every known "
                 "one)")
      ->check(CLI::Range(uint64_t{1}, statestore::kMaxVersion));
  rs->add_flag("--allow-other-run", args->allow_other_run,
               "Run root: read its stores as one run even when they record "
               "different run ids");
  rs->callback([args, exit_code] { *exit_code = RunReshard(*args); });
}

}  // namespace hy::cli
