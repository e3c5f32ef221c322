// Conversions between Python values and hy's types for the bindings: the
// shards Python hands over (name, dtype, global shape, geometry, buffer)
// and the records it gets back.
//
// Thread-safety: call with the GIL held.
#ifndef HY_PYTHON_CONVERT_H_
#define HY_PYTHON_CONVERT_H_

#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

#include "hy/statestore/store.h"

namespace hy::python {

// One shard from Python: (name, dtype name, global shape, geometry text,
// buffer). The buffer is held (not copied) while the shard lives.
struct HeldShard {
  statestore::ShardData data;
  std::unique_ptr<pybind11::buffer_info> buffer;
};

// Converts and checks a list of such tuples: the dtype is a safetensors
// name ("F32", "BF16", ...), the geometry fits the shape and the buffer
// holds exactly its elements. Raises InvalidArgument otherwise.
std::vector<HeldShard> HoldShards(const pybind11::list& shards);

// The blobs from Python: (name, rank or -1, bytes); copied.
struct HeldBlobs {
  std::vector<std::string> bytes;
  std::vector<statestore::BlobData> blobs;
};
HeldBlobs HoldBlobs(const pybind11::list& blobs);

pybind11::dict VersionToDict(const statestore::VersionInfo& v);
pybind11::dict StatsToDict(const statestore::SaveStats& s);

}  // namespace hy::python

#endif  // HY_PYTHON_CONVERT_H_
