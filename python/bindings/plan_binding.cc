// hystate._hy.plan: the transfer plan that changes a model's layout (what
// `hyctl plan` prints), for tensors given as (name, dtype, shape); and
// hystate._hy.reshard: a stored version committed under another layout (what
// `hyctl reshard` does).

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "errors.h"
#include "hy/reshard/layout.h"
#include "hy/reshard/model_spec.h"
#include "hy/reshard/plan.h"
#include "hy/reshard/stored_version.h"
#include "hy/statestore/store.h"

namespace hy::python {

namespace py = pybind11;

namespace {

reshard::Layout ParseLayout(const std::string& text, const char* what) {
  Result<reshard::Layout> layout = reshard::Layout::Parse(text);
  if (!layout.ok()) ThrowStatus(layout.status().WithContext(what));
  return std::move(layout).value();
}

using TensorTuple = std::tuple<std::string, std::string, std::vector<int64_t>>;

py::dict Plan(const std::vector<TensorTuple>& tensors, const std::string& src,
              const std::string& dst, const std::string& rules_yaml,
              int ranks_per_node, double bucket_mib) {
  std::vector<TensorMeta> metas;
  for (const auto& [name, dtype, shape] : tensors) {
    metas.push_back({name, Unwrap(DTypeFromSafetensorsName(dtype)), shape});
    Check(metas.back().Validate());
  }
  const reshard::Layout from = ParseLayout(src, "source layout");
  const reshard::Layout to = ParseLayout(dst, "destination layout");
  const reshard::ModelRules rules =
      rules_yaml.empty() ? reshard::ModelRules::Default()
                         : Unwrap(reshard::ModelRules::ParseYaml(rules_yaml));
  Result<reshard::ModelSpec> built = reshard::ModelSpec::Build(metas, rules);
  if (!built.ok() && built.status().IsNotFound()) {
    ThrowStatus(Status::InvalidArgument(
        std::string(built.status().message()) +
        " (pass rules=YAML with a rule for it; see reshard/rules/llama.yaml)"));
  }
  const reshard::ModelSpec spec = Unwrap(std::move(built));
  if (ranks_per_node < 1 || !(bucket_mib > 0)) {
    ThrowStatus(Status::InvalidArgument(
        "ranks_per_node must be >= 1 and bucket_mib > 0"));
  }
  reshard::Topology topology;
  // A job that grows or shrinks: the larger world (as hyctl plan).
  topology.world_size = std::max(from.world_size(), to.world_size());
  topology.ranks_per_node = ranks_per_node;
  reshard::PlanOptions options;
  options.bucket_bytes =
      static_cast<int64_t>(std::llround(bucket_mib * (1 << 20)));
  Result<reshard::TransferPlan> planned = Status::Internal("unset");
  {
    py::gil_scoped_release release;
    planned = reshard::Plan(from, to, spec, topology, options);
  }
  const reshard::TransferPlan plan = Unwrap(std::move(planned));
  const reshard::PlanStats& s = plan.stats;
  py::dict d;
  d["from"] = plan.src.layout().ToString();
  d["to"] = plan.dst.layout().ToString();
  d["world_size"] = plan.topology.world_size;
  d["model_bytes"] = plan.spec.TotalBytes();
  d["dst_bytes"] = s.dst_bytes;
  d["local_bytes"] = s.local_bytes;
  d["same_node_bytes"] = s.same_node_bytes;
  d["cross_node_bytes"] = s.cross_node_bytes;
  d["network_bytes"] = s.network_bytes();
  d["max_send_bytes"] = s.max_send_bytes;
  d["max_recv_bytes"] = s.max_recv_bytes;
  d["peak_staging_bytes"] = s.peak_staging_bytes;
  d["steps"] = plan.steps.size();
  d["transfers"] = s.num_transfers;
  d["fingerprint"] = plan.Fingerprint();
  return d;
}

// hyctl reshard: commits version `version` of the store at `path` cut for
// layout `to` as a new version.
py::dict Reshard(const std::string& path, uint64_t version,
                 const std::string& to, const std::string& rules_yaml,
                 std::optional<uint64_t> new_version) {
  const reshard::Layout layout = ParseLayout(to, "destination layout");
  std::optional<reshard::ModelRules> rules;
  if (!rules_yaml.empty()) {
    rules = Unwrap(reshard::ModelRules::ParseYaml(rules_yaml));
  }
  Result<reshard::ReshardedVersion> done = Status::Internal("unset");
  {
    py::gil_scoped_release release;
    statestore::StoreOptions o;
    o.create_if_missing = false;
    Result<std::unique_ptr<statestore::Store>> store =
        statestore::Store::Open(path, o);
    done = store.ok() ? reshard::ReshardStoredVersion(
                            store->get(), version, layout,
                            rules ? &*rules : nullptr, new_version)
                      : Result<reshard::ReshardedVersion>(store.status());
  }
  const reshard::ReshardedVersion r = Unwrap(std::move(done));
  py::dict d;
  d["version"] = r.version;
  d["from"] = r.from;
  d["from_world_size"] = r.from_world;
  d["to"] = layout.ToString();
  d["world_size"] = layout.world_size();
  d["tensors"] = r.tensors;
  d["logical_bytes"] = r.stats.logical_bytes;
  d["new_bytes"] = r.stats.new_bytes;
  d["chunks"] = r.stats.chunks;
  d["new_chunks"] = r.stats.new_chunks;
  d["dropped_blobs"] = r.dropped_blobs;
  return d;
}

}  // namespace

void BindPlan(py::module_& m) {
  m.def("plan", &Plan, py::arg("tensors"), py::arg("src"), py::arg("dst"),
        py::arg("rules_yaml") = "", py::arg("ranks_per_node") = 8,
        py::arg("bucket_mib") = 64.0,
        "Totals of the transfer plan from layout src to dst.");
  m.def("reshard", &Reshard, py::arg("path"), py::arg("version"), py::arg("to"),
        py::arg("rules_yaml") = "", py::arg("new_version") = std::nullopt,
        "Commits a stored version cut for another layout as a new version.");
}

}  // namespace hy::python
