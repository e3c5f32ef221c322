// Python values <-> hy types (see convert.h).

#include "convert.h"

#include <pybind11/stl.h>

#include <string>

#include "errors.h"
#include "hy/recovery/node_layout.h"

namespace hy::python {

namespace py = pybind11;

std::vector<HeldShard> HoldShards(const py::list& shards) {
  std::vector<HeldShard> out;
  out.reserve(shards.size());
  for (const py::handle& item : shards) {
    const py::tuple t = py::reinterpret_borrow<py::tuple>(item);
    if (t.size() != 5) {
      ThrowStatus(Status::InvalidArgument(
          "a shard is (name, dtype, shape, geometry, buffer)"));
    }
    HeldShard h;
    TensorMeta& meta = h.data.meta;
    meta.name = t[0].cast<std::string>();
    meta.dtype = Unwrap(DTypeFromSafetensorsName(t[1].cast<std::string>()));
    meta.shape = t[2].cast<std::vector<int64_t>>();
    Check(meta.Validate());
    h.data.geometry = Unwrap(ShardGeometry::Parse(t[3].cast<std::string>()));
    Check(h.data.geometry.Validate(meta.shape).WithContext(meta.name));
    h.buffer = std::make_unique<py::buffer_info>(
        py::reinterpret_borrow<py::buffer>(t[4]).request());
    const size_t want = static_cast<size_t>(h.data.geometry.NumElements()) *
                        DTypeSize(meta.dtype);
    const size_t have = static_cast<size_t>(h.buffer->size) *
                        static_cast<size_t>(h.buffer->itemsize);
    if (have != want) {
      ThrowStatus(Status::InvalidArgument(
          meta.name + ": buffer holds " + std::to_string(have) +
          " bytes, its geometry " + h.data.geometry.ToString() + " needs " +
          std::to_string(want)));
    }
    h.data.data = ConstBytes(static_cast<const uint8_t*>(h.buffer->ptr), have);
    out.push_back(std::move(h));
  }
  return out;
}

HeldBlobs HoldBlobs(const py::list& blobs) {
  HeldBlobs out;
  out.bytes.reserve(blobs.size());
  for (const py::handle& item : blobs) {
    const py::tuple t = py::reinterpret_borrow<py::tuple>(item);
    out.bytes.push_back(t[2].cast<std::string>());
    out.blobs.push_back({t[0].cast<std::string>(), t[1].cast<int>(),
                         ConstBytes(out.bytes.back())});
  }
  return out;
}

py::dict VersionToDict(const statestore::VersionInfo& v) {
  py::dict d;
  d["version"] = v.version;
  d["step"] = v.committed ? v.commit.step : recovery::VersionStep(v.version);
  d["committed"] = v.committed;
  d["aborted"] = v.aborted;
  d["prepared"] = v.prepared;
  if (v.committed) d["world_size"] = v.commit.world_size;
  return d;
}

py::dict StatsToDict(const statestore::SaveStats& s) {
  py::dict d;
  d["logical_bytes"] = s.logical_bytes;
  d["chunks"] = s.chunks;
  d["new_chunks"] = s.new_chunks;
  d["new_bytes"] = s.new_bytes;
  d["delta_chunks"] = s.delta_chunks;
  d["rewritten_chunks"] = s.rewritten_chunks;
  d["stored_bytes"] = s.stored_bytes;
  return d;
}

}  // namespace hy::python
