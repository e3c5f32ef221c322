#include "hy/reshard/shard_map.h"

#include <algorithm>
#include <string>

#include "hy/common/dtype.h"
#include "hy/common/tensor_meta.h"

namespace hy::reshard {
namespace {

// The elements [begin, end) of a shard whose local order is given by
// `runs`, as global runs.
std::vector<FlatRun> SliceRuns(const std::vector<FlatRun>& runs, int64_t begin,
                               int64_t end) {
  std::vector<FlatRun> out;
  int64_t local = 0;
  for (const FlatRun& r : runs) {
    int64_t lo = std::max(begin, local);
    int64_t hi = std::min(end, local + r.length);
    if (lo < hi) {
      int64_t global = r.offset + (lo - local);
      if (!out.empty() && out.back().end() == global) {
        out.back().length += hi - lo;
      } else {
        out.push_back({global, hi - lo});
      }
    }
    local += r.length;
    if (local >= end) break;
  }
  return out;
}

}  // namespace

Result<ShardMap> ShardMap::Build(const Layout& layout, const ModelSpec& spec) {
  const int tp = layout.tp();
  const int pp = layout.pp();
  const int fsdp = layout.fsdp();
  const int n = static_cast<int>(spec.tensors.size());

  // Check everything first, before building anything.
  std::vector<int64_t> numel(n);
  std::vector<int> stage(n);
  bool per_layer = false;
  for (int i = 0; i < n; ++i) {
    const TensorSpec& t = spec.tensors[i];
    HY_RETURN_IF_ERROR(t.meta.Validate());
    HY_ASSIGN_OR_RETURN(numel[i], t.meta.NumElements());
    if (t.tp_dim >= static_cast<int>(t.meta.shape.size()) || t.tp_dim < -1) {
      return Status::InvalidArgument(
          "tensor " + t.meta.name + ": tp_dim " + std::to_string(t.tp_dim) +
          " outside shape " + ShapeString(t.meta.shape));
    }
    if (t.tp_dim >= 0 && t.meta.shape[t.tp_dim] % tp != 0) {
      return Status::InvalidArgument(
          "layout " + layout.ToString() + " does not fit tensor " +
          t.meta.name + ": dimension " + std::to_string(t.tp_dim) + " (" +
          std::to_string(t.meta.shape[t.tp_dim]) + " of shape " +
          ShapeString(t.meta.shape) + ") is not divisible by tp=" +
          std::to_string(tp));
    }
    if (t.stage.kind == StageRule::Kind::kLayer) per_layer = true;
    stage[i] = spec.StageOf(i, pp);
  }
  if (per_layer && pp > spec.NumLayers()) {
    return Status::InvalidArgument(
        "layout " + layout.ToString() + " does not fit the model: pp=" +
        std::to_string(pp) + " stages for " +
        std::to_string(spec.NumLayers()) + " layers");
  }

  ShardMap map;
  map.layout_ = layout;
  map.num_tensors_ = n;
  map.shards_.resize(static_cast<size_t>(layout.world_size()) * n);

  // TP-local box and its runs, per (tp index, tensor).
  std::vector<std::vector<ShardGeometry>> boxes(tp, std::vector<ShardGeometry>(n));
  std::vector<std::vector<std::vector<FlatRun>>> box_runs(
      tp, std::vector<std::vector<FlatRun>>(n));
  std::vector<int64_t> local_numel(n);
  for (int i = 0; i < n; ++i) {
    const TensorSpec& t = spec.tensors[i];
    for (int k = 0; k < tp; ++k) {
      Box box;
      box.offsets.assign(t.meta.shape.size(), 0);
      box.sizes = t.meta.shape;
      if (t.tp_dim >= 0 && tp > 1) {
        int64_t slice = t.meta.shape[t.tp_dim] / tp;
        box.offsets[t.tp_dim] = slice * k;
        box.sizes[t.tp_dim] = slice;
      }
      boxes[k][i] = ShardGeometry::FromBox(std::move(box));
      HY_ASSIGN_OR_RETURN(box_runs[k][i], boxes[k][i].ToFlatRuns(t.meta.shape));
    }
    local_numel[i] = (t.tp_dim >= 0 && tp > 1) ? numel[i] / tp : numel[i];
  }

  // FSDP: the piece size per stage (the stage's flattened TP-local
  // elements, padded to a multiple of fsdp, over fsdp).
  std::vector<int64_t> piece(pp, 0);
  if (fsdp > 1) {
    for (int s = 0; s < pp; ++s) {
      int64_t offset = 0;
      for (int i = 0; i < n; ++i) {
        if (stage[i] != -1 && stage[i] != s) continue;
        offset += local_numel[i];
      }
      piece[s] = (offset + fsdp - 1) / fsdp;
    }
  }

  for (int rank = 0; rank < layout.world_size(); ++rank) {
    Coord c = layout.CoordOf(rank);
    int64_t flat = 0;  // Running offset in this rank's stage buffer.
    for (int i = 0; i < n; ++i) {
      if (stage[i] != -1 && stage[i] != c.pp) continue;
      RankShard& out = map.shards_[static_cast<size_t>(rank) * n + i];
      if (fsdp == 1) {
        out.has_shard = true;
        out.geometry = boxes[c.tp][i];
        out.runs = box_runs[c.tp][i];
        out.num_elements = local_numel[i];
        continue;
      }
      int64_t start = flat;
      flat += local_numel[i];
      int64_t lo = std::max(start, piece[c.pp] * c.fsdp);
      int64_t hi = std::min(start + local_numel[i], piece[c.pp] * (c.fsdp + 1));
      if (lo < hi) {
        out.has_shard = true;
        out.runs = SliceRuns(box_runs[c.tp][i], lo - start, hi - start);
        out.geometry = ShardGeometry::FromRuns(out.runs);
        out.num_elements = hi - lo;
      } else if (local_numel[i] == 0 && c.fsdp == 0) {
        out.has_shard = true;  // An empty tensor still has a (empty) shard.
        out.geometry = ShardGeometry::FromRuns({});
      }
    }
  }
  return map;
}

int64_t ShardMap::RankElements(int rank) const {
  int64_t total = 0;
  for (int i = 0; i < num_tensors_; ++i) total += Get(rank, i).num_elements;
  return total;
}

int64_t ShardMap::RankBytes(int rank, const ModelSpec& spec) const {
  int64_t total = 0;
  for (int i = 0; i < num_tensors_; ++i) {
    total += Get(rank, i).num_elements *
             static_cast<int64_t>(DTypeSize(spec.tensors[i].meta.dtype));
  }
  return total;
}

}  // namespace hy::reshard
