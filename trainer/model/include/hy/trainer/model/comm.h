// Comm: the collectives one rank of the trainer uses.
//
//   world   a reshard::C10dTransport over c10d Gloo (the reshard executor
//           runs over it; on the CPU AllGatherEqual gathers FSDP shards and
//           AllToAllV carries the reduce-scatter of gradients; on every
//           device AllGatherV carries the small per-sample arrays and scalar
//           sums, which live on the host);
//   tp      the rollout's tensor-parallel group (consecutive ranks
//           [g * tp, (g + 1) * tp)), for the all-reduces and all-gathers
//           inside the TP forward: a ProcessGroupGloo on the CPU;
//   device  on cuda, NCCL communicators over the world and over the TP
//           group (reshard::NcclCommunicator, built wherever nvcc and NCCL
//           are), which carry the FSDP gathers, the gradient reduce-scatters
//           and the TP sums on device memory.
// The device is the one the worker chose (trainer.device): cpu, or the GPU
// LOCAL_RANK mod the visible GPUs. Tensors handed to the tensor collectives
// live there.
// On the CPU, sums across ranks are taken in rank order, so a result is a
// function of the contributions and the world size only: deterministic run
// to run. NCCL's sums follow its own order (deterministic for a fixed
// world and NCCL version, not bitwise equal to the host's).
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
#include "hy/trainer/config/device.h"

namespace hy::reshard {
class NcclCommunicator;
}  // namespace hy::reshard

namespace hy::trainer {

struct CommOptions {
  // Size of the rollout's tensor-parallel groups; must divide the world.
  int tp_size = 1;
  // Bound on every wait of a collective and of the set-up.
  int64_t timeout_ms = 120000;
  Device device = Device::kCpu;
  // FSDP's gathers and gradient reductions through equal-size
  // collectives (AllGatherEqual, ReduceScatterSum of padded buffers: the
  // device's algorithm) on the CPU too, so that the device path's
  // arithmetic is tested without a GPU. Always so on cuda.
  bool equal_size_collectives = false;
};

class Comm {
 public:
  // Connects through torchrun's environment and builds the TP groups of
  // size options.tp_size (and, on cuda, the NCCL communicators on GPU
  // LOCAL_RANK mod the visible GPUs). Returns InvalidArgument if tp_size
  // does not divide the world size; Unavailable / DeadlineExceeded /
  // Internal from the transport or NCCL (naming which) otherwise.
  static Result<std::unique_ptr<Comm>> FromEnv(const CommOptions& options);
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

  // Where this rank's tensors live (kCPU, or kCUDA with its ordinal).
  const at::Device& device() const { return device_; }
  bool on_cuda() const { return device_.is_cuda(); }
  // f32 tensor options on device().
  at::TensorOptions f32() const;
  // True when FSDP takes the equal-size collectives (cuda, or the test
  // option on the CPU).
  bool equal_size_collectives() const { return equal_size_; }
  // The world's NCCL communicator on cuda (the rollout reshard's NCCL
  // executor runs over it); null on the CPU.
  std::shared_ptr<reshard::NcclCommunicator> nccl() const { return nccl_; }

  // out = concat of every rank's `send` (all the same numel, f32,
  // contiguous, on device()); out is allocated here.
  Status AllGatherEqual(const at::Tensor& send, at::Tensor* out);

  // In-place sum over the TP group (f32, contiguous, on device()). No-op
  // for tp 1.
  Status TpAllReduce(at::Tensor* t);
  // Concatenates the group's tensors along `dim` in TP-rank order.
  Result<at::Tensor> TpAllGather(const at::Tensor& t, int64_t dim);

  // full = concat of every rank's `shard` (all the same size, f32).
  Status AllGatherShards(const at::Tensor& shard, at::Tensor* full);
  // Reduce-scatter: `full` (on device()) holds world_size equal pieces;
  // returns the sum over ranks of piece rank(), added in rank order on the
  // CPU, in NCCL's order on cuda.
  Result<at::Tensor> ReduceScatterSum(const at::Tensor& full);
  // Element-wise sums over ranks, in rank order (doubles).
  Result<std::vector<double>> SumAcrossRanks(const std::vector<double>& v);
  // Every rank's bytes.
  Result<std::vector<std::vector<uint8_t>>> AllGatherBytes(
      const std::vector<uint8_t>& bytes);

 private:
  struct TpGroup;
  Comm() = default;
  // FromEnv's steps once the transports are up. On cuda (device_ set): the
  // world's NCCL communicator, and the TP group's when tp_size_ > 1.
  Status ConnectNccl(int64_t timeout_ms);
  // On the CPU with tp_size_ > 1: the TP group's Gloo process group, over
  // a client of the world's TCPStore at addr (nullptr: 127.0.0.1).
  Status ConnectGlooTp(const char* addr, const std::string& gloo_hostname,
                       int64_t timeout_ms);
  std::unique_ptr<reshard::C10dTransport> transport_;
  std::unique_ptr<reshard::C10dTransport> aux_;
  int tp_size_ = 1;
  std::unique_ptr<TpGroup> tp_;
  at::Device device_ = at::Device(at::kCPU);
  bool equal_size_ = false;
  std::shared_ptr<reshard::NcclCommunicator> nccl_;     // cuda: the world.
  std::shared_ptr<reshard::NcclCommunicator> nccl_tp_;  // cuda, tp > 1.
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_MODEL_COMM_H_
