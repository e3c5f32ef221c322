// Layout: how the ranks of a job split a model's state. Four dimensions:
//
//   tp    tensor parallel: a tensor with a TP dimension is cut into tp equal
//         slices along it (column-parallel = dim 0, row-parallel = dim 1);
//         tensors without one are replicated across the TP group.
//   pp    pipeline parallel: stage s holds the tensors of its layers only.
//   fsdp  ZeRO-3 flat sharding: per stage, the TP-local pieces of the
//         stage's tensors, in model-spec order and each flattened row-major,
//         are concatenated into one buffer, padded to a multiple of fsdp
//         elements and cut into fsdp equal contiguous pieces.
//   dp    plain replication (with fsdp > 1: HSDP, replicas of the sharding
//         group).
//
// world_size = tp * pp * dp * fsdp.
//
// Rank order. A rank is a mixed-radix number over the dimensions, listed
// from the fastest-varying digit to the slowest. The default order is
//
//   tp, fsdp, dp, pp        rank = tp_i + tp*(fsdp_i + fsdp*(dp_i + dp*pp_i))
//
// so a TP group is tp adjacent ranks (one node) and an FSDP sharding group
// is the next-fastest (within a node when it fits), replicas and pipeline
// stages span nodes. Planner, trainer and store all use this mapping. An
// explicit order may split one dimension into factors, e.g. the HybridFlow
// rollout grouping "order=dp:2-tp-dp": the first 2 of dp varies fastest,
// then tp, then the rest of dp (see RolloutLayoutFor in planner.h).
//
// Text form, the same everywhere (CLI, store manifests, logs):
//
//   layout := item { "," item }
//   item   := ("tp" | "pp" | "dp" | "fsdp") "=" int | "order=" order
//   order  := factor { "-" factor }
//   factor := dim [ ":" int ]       a bare dim takes what is left of it
//
// Keys may come in any order and omitted dimensions are 1; ToString prints
// the canonical form: tp, pp, dp, fsdp in that order, sizes of 1 left out
// (a world of one is "dp=1"), and order only when it differs from the
// default. Examples: "fsdp=8", "tp=2,pp=2,dp=2", "tp=2,fsdp=4",
// "tp=2,dp=4,order=dp:2-tp-dp".
//
// Thread-safety: a Layout is an immutable value after Parse / Make.

#ifndef HY_RESHARD_LAYOUT_H_
#define HY_RESHARD_LAYOUT_H_

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"

namespace hy::reshard {

enum class Dim : uint8_t { kTp = 0, kFsdp = 1, kDp = 2, kPp = 3 };
inline constexpr int kNumDims = 4;

std::string_view DimName(Dim dim);

// One digit of the rank's mixed-radix form: `size` values of `dim`.
struct OrderFactor {
  Dim dim = Dim::kTp;
  int size = 1;
};

// A rank's index in each dimension.
struct Coord {
  int tp = 0;
  int fsdp = 0;
  int dp = 0;
  int pp = 0;

  friend bool operator==(const Coord& a, const Coord& b) {
    return a.tp == b.tp && a.fsdp == b.fsdp && a.dp == b.dp && a.pp == b.pp;
  }
};

class Layout {
 public:
  // dp=1: a single rank.
  Layout();

  // Returns InvalidArgument, quoting the text, for an unknown key, a
  // repeated key, a size < 1, a world size over 1<<20, or an order whose
  // factors do not multiply to each dimension's size.
  static Result<Layout> Parse(std::string_view text);
  // Builds a layout with the default order. Same errors as Parse.
  static Result<Layout> Make(int tp, int pp, int dp, int fsdp);

  int tp() const { return sizes_[0]; }
  int fsdp() const { return sizes_[1]; }
  int dp() const { return sizes_[2]; }
  int pp() const { return sizes_[3]; }
  int size(Dim dim) const { return sizes_[static_cast<int>(dim)]; }
  int world_size() const { return tp() * fsdp() * dp() * pp(); }
  // Fastest-varying first; never empty for world_size() > 1.
  const std::vector<OrderFactor>& order() const { return order_; }

  // REQUIRES: 0 <= rank < world_size().
  Coord CoordOf(int rank) const;
  // REQUIRES: every index within its dimension.
  int RankOf(const Coord& coord) const;

  // Canonical text form (see above).
  std::string ToString() const;

  friend bool operator==(const Layout& a, const Layout& b) {
    return a.ToString() == b.ToString();
  }
  friend bool operator!=(const Layout& a, const Layout& b) {
    return !(a == b);
  }

 private:
  std::array<int, kNumDims> sizes_{1, 1, 1, 1};
  std::vector<OrderFactor> order_;  // Factors of size 1 dropped.
};

}  // namespace hy::reshard

#endif  // HY_RESHARD_LAYOUT_H_
