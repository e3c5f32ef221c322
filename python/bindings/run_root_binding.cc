// hystate._hy.RunRoot and path_kind: a checkpoint directory as
// hy/recovery/run_root.h sees it (its nodes, stores, run and committed
// steps), so that the package names paths as hyctl does.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "errors.h"
#include "hy/recovery/run_root.h"

namespace hy::python {
namespace {

namespace py = pybind11;
using recovery::PathKind;
using recovery::RunRoot;

const char* KindName(PathKind k) {
  switch (k) {
    case PathKind::kMissing:
      return "missing";
    case PathKind::kRunRoot:
      return "run_root";
    case PathKind::kRunStore:
      return "run_store";
    case PathKind::kStore:
      return "store";
    case PathKind::kOther:
      break;
  }
  return "other";
}

class PyRunRoot {
 public:
  explicit PyRunRoot(const std::string& path)
      : root_(Unwrap(RunRoot::Open(path))) {}

  const std::string& Path() const { return root_.path(); }

  std::vector<int> Nodes() const { return Unwrap(root_.Nodes()); }

  py::list Stores() const {
    std::vector<recovery::StoreLocation> stores;
    {
      py::gil_scoped_release release;
      stores = Unwrap(root_.Stores());
    }
    py::list out;
    for (const recovery::StoreLocation& s : stores) {
      py::dict d;
      d["path"] = s.path;
      d["node"] = s.node;
      d["source_node"] = s.source_node;
      d["slot"] = s.slot;
      d["replica"] = s.replica;
      out.append(d);
    }
    return out;
  }

  std::string RunId() const {
    Result<std::string> id = [&] {
      py::gil_scoped_release release;
      return root_.RunId();
    }();
    return Unwrap(std::move(id));
  }

  std::vector<uint64_t> Steps(bool allow_other_run) const {
    Result<recovery::RunRootScan> scan = [&] {
      py::gil_scoped_release release;
      return root_.Scan(allow_other_run);
    }();
    const std::set<uint64_t> steps = Unwrap(std::move(scan)).CommittedSteps();
    return std::vector<uint64_t>(steps.begin(), steps.end());
  }

 private:
  RunRoot root_;
};

}  // namespace

void BindRunRoot(py::module_& m) {
  m.def(
      "path_kind",
      [](const std::string& path) { return KindName(RunRoot::Classify(path)); },
      py::arg("path"),
      "What a path names: 'run_root' (node-<k>/ directories), 'run_store' "
      "(a store inside one), 'store', 'missing' or 'other'.");
  py::class_<PyRunRoot>(m, "RunRoot")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("path", &PyRunRoot::Path)
      .def("nodes", &PyRunRoot::Nodes)
      .def("stores", &PyRunRoot::Stores)
      .def("run_id", &PyRunRoot::RunId)
      .def("steps", &PyRunRoot::Steps, py::arg("allow_other_run") = false);
}

}  // namespace hy::python
