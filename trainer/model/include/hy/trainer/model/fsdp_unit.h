// FsdpUnits: an FsdpModel's tensors grouped into FSDP units the way
// PyTorch FSDP wraps each decoder layer: unit 0 is the root (embedding,
// final norm, lm_head or score), unit 1 + i is decoder layer i. A unit's
// parameters are gathered just before it is used and freed after; its
// gradient is reduced to the ranks that hold it just after its backward.
//
// The shard geometry stays FsdpModel's (one flat buffer cut into equal
// pieces, reshard's fsdp=N, which the store and the reshard executor read
// in place). A unit is one or two ranges of that buffer and lies in the
// pieces of one or a few ranks, so its gather is an all-gather of
// variable-size parts (mostly one rank's) and the reduction of its gradient
// an all-to-all sending each holder its part. The holder adds the parts in
// rank order into a zeroed gradient piece, exactly as
// Comm::ReduceScatterSum adds them: a step by units is bit-identical to a
// step over the whole flat buffer.
//
// On a GPU (Comm::equal_size_collectives()) the same exchanges go through
// equal-size collectives, which NCCL has: each rank's stream padded to the
// longest, one all-gather; each owner's window of gradient padded to the
// round's longest, one reduce-scatter. The values are the same (padding is
// never read; the sum starts from zero), and the copies in and out are
// tensor ops on the device. FlatRun::data then points into device memory.
//
// Part of hy_trainer_model (LibTorch; ppo/ uses it). Holds a pointer to the
// model, which must outlive it. Thread-safety: one thread.

#ifndef HY_TRAINER_MODEL_FSDP_UNIT_H_
#define HY_TRAINER_MODEL_FSDP_UNIT_H_

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/trainer/model/fsdp.h"

namespace hy::trainer {

class Comm;

class FsdpUnits {
 public:
  // reduce_window: the most elements ReduceGradient sends each owner per
  // round (tests make it small to run many rounds).
  explicit FsdpUnits(const FsdpModel* model,
                     int64_t reduce_window = int64_t{8} << 20);

  int num_units() const { return static_cast<int>(units_.size()); }
  int64_t numel(int unit) const { return units_[unit].numel; }
  static int LayerUnit(int layer) { return 1 + layer; }

  // Unit `unit`'s parameters [numel(unit)] (f32) from every rank's piece.
  // Returns the transport's errors; Internal if a peer sent a part of the
  // wrong size.
  Status Gather(Comm* comm, int unit, at::Tensor* buffer) const;
  // Adds the sum over ranks of each rank's `grad` of `unit` ([numel(unit)])
  // into the part of *piece (this rank's [model.piece()] gradient) the unit
  // covers, in rank order, exchanged in rounds of at most reduce_window
  // elements per owner (so an owner holds world - 1 such windows, not
  // world - 1 copies of its share). Returns the transport's errors; Internal if
  // a peer sent a part of the wrong size. REQUIRES: that part of *piece is zero
  // (each unit is reduced once).
  Status ReduceGradient(Comm* comm, int unit, const at::Tensor& grad,
                        at::Tensor* piece) const;
  // A run [begin, end) of the flat buffer and where its values are: where
  // GatherRuns writes them, where ReduceRuns reads this rank's gradient.
  struct FlatRun {
    int64_t begin = 0, end = 0;
    float* data = nullptr;
  };
  // The parameters of any runs of the flat buffer (disjoint, in any order),
  // from the ranks that hold them; every rank passes runs of the same
  // lengths. Errors as Gather.
  Status GatherRuns(Comm* comm, const std::vector<FlatRun>& runs) const;
  // ReduceGradient over any runs (disjoint; the same on every rank): the
  // sum over ranks of each rank's run data, added in rank order into the
  // part of *piece the runs cover. Errors and REQUIRES as ReduceGradient.
  Status ReduceRuns(Comm* comm, const std::vector<FlatRun>& runs,
                    at::Tensor* piece) const;
  // Unit `unit`'s runs with data at their place in `buffer`
  // ([numel(unit)] f32).
  std::vector<FlatRun> UnitRuns(int unit, const at::Tensor& buffer) const;

  // Tensor `name` as a view of a gathered unit buffer; a leaf whose
  // gradient lands in buffer.grad() when that is defined (as
  // FsdpModel::View). Undefined if `name` is not in `unit`.
  at::Tensor View(const at::Tensor& buffer, int unit,
                  const std::string& name) const;

 private:
  struct Range {
    int64_t begin = 0, end = 0;  // In the flat buffer.
    int64_t at = 0;              // Where it starts in the unit's buffer.
  };
  struct Unit {
    std::vector<Range> ranges;
    int64_t numel = 0;
  };
  // The part of r inside rank p's piece (empty: begin == end).
  FlatRun Part(const FlatRun& r, int p) const;
  // Rank q's stream of `runs`: its parts of them, in run order. Its
  // length, and fn(flat offset, data, length, stream position) for each
  // piece of stream positions [lo, hi).
  int64_t StreamLength(const std::vector<FlatRun>& runs, int q) const;
  // GatherRuns and ReduceRuns through equal-size collectives.
  Status GatherRunsEqual(Comm* comm, const std::vector<FlatRun>& runs) const;
  Status ReduceRunsEqual(Comm* comm, const std::vector<FlatRun>& runs,
                         at::Tensor* piece) const;
  void VisitStream(const std::vector<FlatRun>& runs, int q, int64_t lo,
                   int64_t hi,
                   const std::function<void(int64_t flat, float* data,
                                            int64_t n, int64_t pos)>& fn) const;

  const FsdpModel* model_;
  const int64_t reduce_window_;
  std::vector<Unit> units_;
  std::vector<int> unit_of_;      // Per tensor.
  std::vector<int64_t> unit_at_;  // Per tensor: offset in its unit buffer.
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_MODEL_FSDP_UNIT_H_
