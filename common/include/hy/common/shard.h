// ShardGeometry: which elements of a tensor one rank holds (its shard), and
// in what order they sit in that rank's local buffer.
//
// The store records a geometry per shard in its manifests; the layout
// planner (module reshard) produces them. A geometry is one of two kinds:
//
//   kBox   an N-d box: per dimension an offset and a size over the global
//          shape (tensor parallel splits, pipeline slices). The local buffer
//          holds the box's elements in row-major order.
//   kRuns  a list of flat runs (offset, length) in ELEMENTS of the row-major
//          flattened global tensor (FSDP / ZeRO flat shards). The local buffer
//          holds run after run, in list order; runs need not be sorted but
//          must not overlap.
//
// A geometry does not carry the global shape: the tensor's metadata does.
// Validate(shape) says whether a geometry fits a shape; ToFlatRuns(shape)
// reduces either kind to flat runs, the common currency of IntersectRuns and
// CheckExactCover.
//
// Text form (ToString / Parse), stable and part of the manifest format:
//
//   geometry := box | runs
//   box      := "box[" [ range { "," range } ] "]"    one range per dimension
//   range    := int ":" int                           begin:end, half-open
//   runs     := "runs[" [ run { "," run } ] "]"       in local-buffer order
//   run      := int "+" int                           offset+length
//   int      := "0" | [1-9][0-9]*                     decimal, fits int64
//
// No whitespace, signs or leading zeros: every text has one spelling, so
// ToString(Parse(t)) == t whenever Parse(t) succeeds. Examples:
// "box[0:64,128:256]" (rows [0,64), columns [128,256)), "box[]" (a scalar),
// "runs[0+100,200+50]", "runs[]" (a shard that holds nothing).
//
// Thread-safety: ShardGeometry, Box and FlatRun are plain values; the free
// functions are pure.

#ifndef HY_COMMON_SHARD_H_
#define HY_COMMON_SHARD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"

namespace hy {

// A contiguous range [offset, offset + length) of elements of a row-major
// flattened tensor.
struct FlatRun {
  int64_t offset = 0;
  int64_t length = 0;

  int64_t end() const { return offset + length; }

  friend bool operator==(const FlatRun& a, const FlatRun& b) {
    return a.offset == b.offset && a.length == b.length;
  }
  friend bool operator!=(const FlatRun& a, const FlatRun& b) {
    return !(a == b);
  }
};

// An N-d box: in dimension d, indices [offsets[d], offsets[d] + sizes[d]).
// offsets and sizes have one entry per dimension (none for a scalar).
struct Box {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;

  friend bool operator==(const Box& a, const Box& b) {
    return a.offsets == b.offsets && a.sizes == b.sizes;
  }
  friend bool operator!=(const Box& a, const Box& b) { return !(a == b); }
};

class ShardGeometry {
 public:
  enum class Kind : uint8_t { kBox = 1, kRuns = 2 };

  // The box of rank 0: the whole of a scalar.
  ShardGeometry() = default;

  // A box covering all of a tensor of `shape`.
  static ShardGeometry WholeTensor(const std::vector<int64_t>& shape);
  // No checks here; Validate against the tensor's shape before use.
  static ShardGeometry FromBox(Box box);
  static ShardGeometry FromRuns(std::vector<FlatRun> runs);

  Kind kind() const { return kind_; }
  // REQUIRES: kind() == Kind::kBox.
  const Box& box() const { return box_; }
  // REQUIRES: kind() == Kind::kRuns.
  const std::vector<FlatRun>& runs() const { return runs_; }

  // Returns OK if this geometry fits a tensor of `shape`, else
  // InvalidArgument saying why. The shape itself must have non-negative
  // dimensions whose product fits int64. A box must have one offset and one
  // size per dimension, offsets >= 0, sizes >= 0 and offset + size <= the
  // dimension (zero sizes are allowed: an empty box). Runs must each have
  // length > 0, offset >= 0 and end <= the element count, and no two may
  // overlap; any order is allowed, and an empty list is a shard with no
  // elements. All arithmetic is overflow-safe.
  Status Validate(const std::vector<int64_t>& shape) const;

  // The number of elements the shard holds (the product of the box sizes,
  // 1 for a rank-0 box; the sum of the run lengths). Returns -1 if that is
  // undefined: a negative size or length, or a count that overflows int64;
  // never the case once Validate has succeeded for some shape.
  int64_t NumElements() const;

  // The shard's elements as flat runs over the global tensor, in
  // local-buffer order, with runs that are adjacent both in the list and in
  // the tensor merged. A box yields one run per index of its leading
  // dimensions up to the last partial one: trailing dimensions the box
  // covers fully collapse into the run length, so [0:2,1:3,0:4] of [2,3,4]
  // gives runs[4+8,16+8] and any box of full rows gives one run. An empty
  // box gives no runs. Returns InvalidArgument as Validate does.
  Result<std::vector<FlatRun>> ToFlatRuns(
      const std::vector<int64_t>& shape) const;

  // The text form described at the top of this file. Parse(ToString()) gives
  // back an equal geometry for every geometry that is valid for some shape
  // (no negative numbers, box offset + size within int64); others print for
  // debugging but do not parse.
  std::string ToString() const;

  // Parses the text form. Returns InvalidArgument, quoting the text and the
  // position, for anything else, and for texts no shape could accept: a
  // range with end < begin, a run of length 0, a run end beyond int64, or
  // overlapping runs.
  static Result<ShardGeometry> Parse(std::string_view text);

  // Structural equality: the same kind and the same numbers, in the same
  // order. A box and a run list that cover the same elements are not equal.
  friend bool operator==(const ShardGeometry& a, const ShardGeometry& b) {
    return a.kind_ == b.kind_ && a.box_ == b.box_ && a.runs_ == b.runs_;
  }
  friend bool operator!=(const ShardGeometry& a, const ShardGeometry& b) {
    return !(a == b);
  }

 private:
  Kind kind_ = Kind::kBox;
  Box box_;                    // Empty unless kind_ == kBox.
  std::vector<FlatRun> runs_;  // Empty unless kind_ == kRuns.
};

// Sum of the run lengths.
int64_t TotalLength(const std::vector<FlatRun>& runs);

// One piece of the overlap of a global range with a shard: `length` elements
// found at `local_offset` in the shard's local buffer and at `global_offset`
// in the flattened global tensor.
struct RunOverlap {
  int64_t local_offset = 0;
  int64_t global_offset = 0;
  int64_t length = 0;

  friend bool operator==(const RunOverlap& a, const RunOverlap& b) {
    return a.local_offset == b.local_offset &&
           a.global_offset == b.global_offset && a.length == b.length;
  }
  friend bool operator!=(const RunOverlap& a, const RunOverlap& b) {
    return !(a == b);
  }
};

// The overlap of the global range `range` with a shard given as flat runs in
// local-buffer order (as ToFlatRuns returns them): one piece per shard run
// that meets the range, in the order of `shard_runs`. Empty if nothing
// overlaps or range.length <= 0. O(shard_runs.size()).
// REQUIRES: shard_runs have offset >= 0 and length >= 0 and do not overlap;
//           range.offset + range.length does not overflow int64.
std::vector<RunOverlap> IntersectRuns(const std::vector<FlatRun>& shard_runs,
                                      FlatRun range);

// Returns OK if the shards' runs together cover [0, numel) exactly once.
// Otherwise InvalidArgument naming the first problem in element order: a run
// with offset < 0 or length <= 0 (naming the shard and run index), a run
// reaching past numel, elements covered by two shards (naming both), or
// elements covered by none. Runs of one shard may come in any order.
// O(R log R) for R runs in all.
Status CheckExactCover(const std::vector<std::vector<FlatRun>>& shards,
                       int64_t numel);

}  // namespace hy

#endif  // HY_COMMON_SHARD_H_
