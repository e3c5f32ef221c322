// hystate._hy.Store and hystate._hy.SaveHandle: one store, as the Python layer
// (hy/__init__.py) drives it: save a rank's part (synchronously or in the
// background), commit or abort a version, list, verify, collect garbage.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "convert.h"
#include "errors.h"
#include "hy/statestore/store.h"

namespace hy::python {

namespace py = pybind11;
using statestore::Store;

namespace {

// A save running in the background; the part was copied at call time.
class SaveHandle {
 public:
  explicit SaveHandle(std::unique_ptr<statestore::SaveHandle> h)
      : handle_(std::move(h)) {}
  // Blocks (without the GIL) until the save is durable; returns its stats.
  py::dict Wait() {
    statestore::SaveStats stats;
    Status s;
    {
      py::gil_scoped_release release;
      s = handle_->Wait(&stats);
    }
    Check(s);
    return StatsToDict(stats);
  }
  bool Done() const { return handle_->Done(); }

 private:
  std::unique_ptr<statestore::SaveHandle> handle_;
};

class PyStore {
 public:
  PyStore(const std::string& path, bool create, bool read_only,
          const std::string& run_id, uint64_t chunk_bytes) {
    statestore::StoreOptions o;
    if (chunk_bytes > 0) o.chunk_bytes = chunk_bytes;
    o.create_if_missing = create;
    o.read_only = read_only;
    o.run_id = run_id;
    Status s;
    {
      py::gil_scoped_release release;
      auto r = Store::Open(path, o);
      if (r.ok()) store_ = std::move(r).value();
      s = r.status();
    }
    Check(s);
  }

  py::list Versions() {
    py::list out;
    for (const auto& v : Unwrap(store_->ListVersions())) {
      out.append(VersionToDict(v));
    }
    return out;
  }

  py::dict Save(uint64_t version, int rank, const py::list& shards,
                const py::list& blobs) {
    statestore::SavePart part = Part(version, rank, shards, blobs);
    statestore::SaveStats stats;
    Status s;
    {
      py::gil_scoped_release release;
      s = store_->Save(part, &stats);
    }
    Check(s);
    return StatsToDict(stats);
  }

  SaveHandle SaveAsync(uint64_t version, int rank, const py::list& shards,
                       const py::list& blobs) {
    statestore::SavePart part = Part(version, rank, shards, blobs);
    Result<std::unique_ptr<statestore::SaveHandle>> h =
        Status::Internal("unset");
    {
      py::gil_scoped_release release;  // SaveAsync copies the buffers.
      h = store_->SaveAsync(std::move(part));
    }
    return SaveHandle(Unwrap(std::move(h)));
  }

  void Commit(uint64_t version, uint64_t step, int world_size, int rank,
              const std::string& layout, uint64_t logical, uint64_t stored,
              uint64_t fresh, int64_t wall_time_ms) {
    statestore::CommitRecord c;
    c.version = version;
    c.step = step;
    c.world_size = world_size;
    c.ranks = {rank};
    c.layout = layout;
    c.logical_bytes = logical;
    c.stored_bytes = stored;
    c.new_bytes = fresh;
    c.wall_time_ms = wall_time_ms;
    Status s;
    {
      py::gil_scoped_release release;
      s = store_->Commit(c);
    }
    Check(s);
  }

  void Abort(uint64_t version) { Check(store_->Abort(version)); }

  py::dict Verify(uint64_t version) {
    Result<statestore::VerifyReport> r = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      r = store_->Verify(version);
    }
    const statestore::VerifyReport report = Unwrap(std::move(r));
    py::list bad;
    for (const statestore::BadChunk& b : report.bad) {
      bad.append(
          py::make_tuple(b.tensor, b.rank, b.index, b.status.ToString()));
    }
    py::dict d;
    d["chunks_checked"] = report.chunks_checked;
    py::dict formats;
    for (const auto& [format, n] : report.chunks_by_format) {
      formats[py::int_(format)] = n;
    }
    d["chunks_by_format"] = formats;
    d["bytes_checked"] = report.bytes_checked;
    d["bad"] = bad;
    return d;
  }

  py::dict Gc(size_t keep_last) {
    statestore::GcOptions o;
    o.keep_last = keep_last;
    Result<statestore::GcReport> r = Status::Internal("unset");
    {
      py::gil_scoped_release release;
      r = store_->Gc(o);
    }
    const statestore::GcReport g = Unwrap(std::move(r));
    py::dict d;
    d["dropped_versions"] = g.dropped_versions;
    d["dropped_uncommitted"] = g.dropped_uncommitted;
    d["reclaimed_bytes"] = g.reclaimed_bytes;
    return d;
  }

  std::string RunId() const { return store_->run_id(); }

  // name -> (dtype name, shape) of a committed version.
  py::dict Tensors(uint64_t version) {
    const statestore::Manifest m = Unwrap(store_->ReadManifest(version));
    py::dict out;
    for (const auto& [name, entry] : m.tensors) {
      out[py::str(name)] = py::make_tuple(
          std::string(SafetensorsName(entry.meta.dtype)), entry.meta.shape);
    }
    return out;
  }

 private:
  // The part to save; the shards' buffers are held by held_ until the
  // save has read them (SaveAsync copies; Save reads during the call).
  statestore::SavePart Part(uint64_t version, int rank, const py::list& shards,
                            const py::list& blobs) {
    held_ = HoldShards(shards);
    held_blobs_ = HoldBlobs(blobs);
    statestore::SavePart part;
    part.version = version;
    part.rank = rank;
    for (const HeldShard& h : held_) part.shards.push_back(h.data);
    part.blobs = held_blobs_.blobs;
    return part;
  }

  std::unique_ptr<Store> store_;
  std::vector<HeldShard> held_;
  HeldBlobs held_blobs_;
};

}  // namespace

void BindStore(py::module_& m) {
  py::class_<SaveHandle>(m, "SaveHandle")
      .def("wait", &SaveHandle::Wait,
           "Blocks until the part is durable (prepared); returns its stats.")
      .def("done", &SaveHandle::Done);
  py::class_<PyStore>(m, "Store")
      .def(py::init<const std::string&, bool, bool, const std::string&,
                    uint64_t>(),
           py::arg("path"), py::arg("create") = false,
           py::arg("read_only") = true, py::arg("run_id") = "",
           py::arg("chunk_bytes") = 0)
      .def("versions", &PyStore::Versions)
      .def("save", &PyStore::Save)
      .def("save_async", &PyStore::SaveAsync)
      .def("commit", &PyStore::Commit)
      .def("abort", &PyStore::Abort)
      .def("verify", &PyStore::Verify)
      .def("gc", &PyStore::Gc)
      .def("tensors", &PyStore::Tensors)
      .def_property_readonly("run_id", &PyStore::RunId);
}

}  // namespace hy::python
