// hystate._hy.Reader: a committed version of a run root (every rank's store and
// replica under it, hy/checkpoint/checkpoint.h's CheckpointReader), read
// region by region straight into the caller's buffers.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "hy/checkpoint/checkpoint.h"

namespace hy::python {

namespace py = pybind11;

namespace {

class PyReader {
 public:
  PyReader(const std::string& root, int64_t step) {
    Result<std::unique_ptr<checkpoint::CheckpointReader>> r =
        Status::Internal("unset");
    {
      py::gil_scoped_release release;
      r = checkpoint::CheckpointReader::Open(root, step);
    }
    reader_ = Unwrap(std::move(r));
  }

  uint64_t Step() const { return reader_->step(); }
  uint64_t Version() const { return reader_->version(); }
  int WorldSize() const { return reader_->commit().world_size; }

  // name -> (dtype name, shape).
  py::dict Tensors() const {
    py::dict out;
    for (const std::string& name : reader_->TensorNames()) {
      const TensorMeta meta = Unwrap(reader_->FindTensor(name));
      out[py::str(name)] =
          py::make_tuple(std::string(SafetensorsName(meta.dtype)), meta.shape);
    }
    return out;
  }

  // Fills `out` (a writable buffer of exactly the runs' elements) with the
  // flat runs of `tensor`, run after run.
  void Read(const std::string& tensor,
            const std::vector<std::pair<int64_t, int64_t>>& runs,
            const py::buffer& out) {
    const py::buffer_info info = out.request(/*writable=*/true);
    const TensorMeta meta = Unwrap(reader_->FindTensor(tensor));
    const size_t esize = DTypeSize(meta.dtype);
    size_t need = 0;
    for (const auto& [offset, length] : runs) {
      need += static_cast<size_t>(length) * esize;
    }
    const size_t have =
        static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
    if (have != need) {
      ThrowStatus(Status::InvalidArgument(
          tensor + ": the target holds " + std::to_string(have) +
          " bytes, the regions asked for are " + std::to_string(need)));
    }
    std::vector<FlatRun> flat;
    flat.reserve(runs.size());
    for (const auto& [offset, length] : runs) flat.push_back({offset, length});
    Status s;
    {
      py::gil_scoped_release release;
      s = reader_->ReadRuns(
          tensor, flat, MutableBytes(static_cast<uint8_t*>(info.ptr), need));
    }
    Check(s);
  }

  // A replicated blob (rank -1) or old rank `rank`'s own one.
  py::bytes Blob(const std::string& name, int rank) {
    return py::bytes(Unwrap(reader_->ReadBlob(name, rank)));
  }

 private:
  std::unique_ptr<checkpoint::CheckpointReader> reader_;
};

}  // namespace

void BindReader(py::module_& m) {
  py::class_<PyReader>(m, "Reader")
      .def(py::init<const std::string&, int64_t>(), py::arg("root"),
           py::arg("step") = -1)
      .def_property_readonly("step", &PyReader::Step)
      .def_property_readonly("version", &PyReader::Version)
      .def_property_readonly("world_size", &PyReader::WorldSize)
      .def("tensors", &PyReader::Tensors)
      .def("read", &PyReader::Read)
      .def("blob", &PyReader::Blob, py::arg("name"), py::arg("rank") = -1)
      .def("blob_of", &PyReader::Blob);
}

}  // namespace hy::python
