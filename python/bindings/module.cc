// The extension module hystate._hy: the C++ half of the Python package
// `hystate` (python/hystate/__init__.py holds the API users call).

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "errors.h"
#include "hy/common/shard.h"
#include "hy/recovery/node_layout.h"

namespace hy::python {
void BindStore(pybind11::module_& m);
void BindReader(pybind11::module_& m);
void BindPlan(pybind11::module_& m);
void BindRunRoot(pybind11::module_& m);
void BindGaps(pybind11::module_& m);
}  // namespace hy::python

namespace py = pybind11;

PYBIND11_MODULE(_hy, m) {
  m.doc() =
      "hy's stores, from Python (use the package hystate, not this module)";
  m.attr("__version__") = HY_VERSION;
  hy::python::RegisterErrors(m);
  hy::python::BindStore(m);
  hy::python::BindReader(m);
  hy::python::BindPlan(m);
  hy::python::BindRunRoot(m);
  hy::python::BindGaps(m);
  // Flat runs of an N-d box of a tensor of `shape` (row-major).
  m.def("box_runs", [](const std::vector<int64_t>& offsets,
                       const std::vector<int64_t>& sizes,
                       const std::vector<int64_t>& shape) {
    const hy::ShardGeometry g =
        hy::ShardGeometry::FromBox(hy::Box{offsets, sizes});
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const hy::FlatRun& r : hy::python::Unwrap(g.ToFlatRuns(shape))) {
      out.emplace_back(r.offset, r.length);
    }
    return out;
  });
  // A store's version id: step << 16 | generation, made and split by
  // recovery's helpers, as hyctl and the trainer do.
  m.def("version_id", [](uint64_t step, uint32_t generation) {
    return hy::recovery::MakeVersion(step, generation);
  });
  m.def("version_step", &hy::recovery::VersionStep);
  m.def("version_generation", &hy::recovery::VersionGeneration);
  m.def("box_geometry", [](const std::vector<int64_t>& offsets,
                           const std::vector<int64_t>& sizes) {
    return hy::ShardGeometry::FromBox(hy::Box{offsets, sizes}).ToString();
  });
}
