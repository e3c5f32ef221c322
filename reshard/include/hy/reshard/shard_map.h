// ShardMap: every rank's shard of every tensor under one layout, in the
// ShardGeometry type the store records (hy/common/shard.h).
//
//   fsdp == 1   a rank holds a box: the tensor's TP slice (the whole tensor
//               if it has no TP dimension or tp == 1).
//   fsdp > 1    a rank holds flat runs: its piece of the stage's flattened
//               buffer (see layout.h), intersected with each tensor and
//               mapped back to the tensor's global row-major offsets. A rank
//               whose piece misses a tensor holds nothing of it.
//
// A rank of another pipeline stage holds nothing of a tensor. "Holds
// nothing" is has_shard == false; a held shard has at least one element
// unless the tensor itself is empty.
//
// Thread-safety: a ShardMap is an immutable value once built.

#ifndef HY_RESHARD_SHARD_MAP_H_
#define HY_RESHARD_SHARD_MAP_H_

#include <cstdint>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/shard.h"
#include "hy/reshard/layout.h"
#include "hy/reshard/model_spec.h"

namespace hy::reshard {

struct RankShard {
  bool has_shard = false;
  ShardGeometry geometry;
  std::vector<FlatRun> runs;  // geometry.ToFlatRuns(shape), precomputed.
  int64_t num_elements = 0;
};

class ShardMap {
 public:
  // Returns InvalidArgument before anything is built if a TP dimension is
  // not divisible by tp (naming tensor, dimension and sizes), if pp exceeds
  // the number of layers while some tensor is per-layer, or if a tensor's
  // metadata is invalid.
  static Result<ShardMap> Build(const Layout& layout, const ModelSpec& spec);

  const Layout& layout() const { return layout_; }
  int world_size() const { return layout_.world_size(); }
  int num_tensors() const { return num_tensors_; }

  // REQUIRES: 0 <= rank < world_size(), 0 <= tensor < num_tensors().
  const RankShard& Get(int rank, int tensor) const {
    return shards_[static_cast<size_t>(rank) * num_tensors_ + tensor];
  }
  // Elements rank `rank` holds over all tensors.
  int64_t RankElements(int rank) const;
  // Bytes rank `rank` holds over all tensors (element sizes from the spec).
  int64_t RankBytes(int rank, const ModelSpec& spec) const;

 private:
  Layout layout_;
  int num_tensors_ = 0;
  std::vector<RankShard> shards_;  // [rank * num_tensors + tensor]
};

}  // namespace hy::reshard

#endif  // HY_RESHARD_SHARD_MAP_H_
