// Comm: the collectives one rank of the trainer uses, over c10d Gloo.
//
//   world   a reshard::C10dTransport (the reshard executor runs over it;
//           AllGatherEqual gathers FSDP shards, AllToAllV carries the
//           reduce-scatter of gradients, AllGatherV the small per-sample
//           arrays and scalar sums);
//   tp      a ProcessGroupGloo over this rank's rollout tensor-parallel
//           group (consecutive ranks [g * tp, (g + 1) * tp)), for the
//           all-reduces and all-gathers inside the TP forward.
// Sums across ranks are taken in rank order, so a result is a function of
// the contributions and the world size only: deterministic run to run.
//
// Part of hy_trainer_model (includes ATen; ppo/ uses it). Thread-safety: one
// thread.

#ifndef HY_TRAINER_MODEL_COMM_H_
#define HY_TRAINER_MODEL_COMM_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/reshard/c10d_transport.h"

namespace hy::trainer {

class Comm {
 public:
  // Connects through torchrun's environment and builds the TP groups of
  // size tp_size. Returns InvalidArgument if tp_size does not divide the
  // world size; the transport's errors otherwise.
  static Result<std::unique_ptr<Comm>> FromEnv(int tp_size, int64_t timeout_ms);
  ~Comm();

  int rank() const { return transport_->rank(); }
  int world_size() const { return transport_->world_size(); }
  int tp_size() const { return tp_size_; }
  int tp_rank() const { return rank() % tp_size_; }
  int dp_rank() const { return rank() / tp_size_; }
  int dp_size() const { return world_size() / tp_size_; }
  reshard::C10dTransport* transport() { return transport_.get(); }
  // A second transport over the same store, for the checkpoint thread
  // (replication) beside the training loop's collectives; its kv() is the
  // heartbeat's.
  reshard::C10dTransport* aux() { return aux_.get(); }

  // In-place sum over the TP group (f32, contiguous). No-op for tp 1.
  Status TpAllReduce(at::Tensor* t);
  // Concatenates the group's tensors along `dim` in TP-rank order.
  Result<at::Tensor> TpAllGather(const at::Tensor& t, int64_t dim);

  // full = concat of every rank's `shard` (all the same size, f32).
  Status AllGatherShards(const at::Tensor& shard, at::Tensor* full);
  // Reduce-scatter: `full` holds world_size equal pieces; returns the sum
  // over ranks of piece rank(), added in rank order.
  Result<at::Tensor> ReduceScatterSum(const at::Tensor& full);
  // Element-wise sums over ranks, in rank order (doubles).
  Result<std::vector<double>> SumAcrossRanks(const std::vector<double>& v);
  // Every rank's bytes.
  Result<std::vector<std::vector<uint8_t>>> AllGatherBytes(
      const std::vector<uint8_t>& bytes);

 private:
  struct TpGroup;
  Comm() = default;
  std::unique_ptr<reshard::C10dTransport> transport_;
  std::unique_ptr<reshard::C10dTransport> aux_;
  int tp_size_ = 1;
  std::unique_ptr<TpGroup> tp_;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_MODEL_COMM_H_
