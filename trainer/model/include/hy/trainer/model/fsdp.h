// FsdpModel: one model's state on one rank under FSDP (ZeRO-3, one flat
// unit): every tensor in model-spec order, flattened and concatenated,
// padded to a multiple of the world size and cut into equal pieces; rank r
// holds piece r of the f32 master parameters and, for a model it trains, of
// the two Adam moments.
// This is exactly the geometry reshard's ShardMap gives layout fsdp=N (so
// the reshard executor and the store read the shard in place; Create
// checks the two agree).
//
// Forward/backward all-gather the pieces into a full flat buffer; the
// gradient of that buffer is reduce-scattered back to the pieces, and Adam
// updates the local piece only.
//
// Part of hy_trainer_model (LibTorch; ppo/ uses it). Thread-safety: one thread.

#ifndef HY_TRAINER_MODEL_FSDP_H_
#define HY_TRAINER_MODEL_FSDP_H_

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/reshard/model_spec.h"
#include "hy/reshard/shard_map.h"
#include "hy/statestore/store.h"
#include "hy/trainer/config/config.h"
#include "hy/trainer/config/model_config.h"
#include "hy/trainer/hf/hf_model.h"
#include "hy/trainer/model/offload.h"

namespace hy::trainer {

class Comm;

class FsdpModel {
 public:
  // A model with `optimizer` holds Adam moments; one without (a frozen
  // reference) holds none: empty exp_avg() and exp_avg_sq(). Its pieces
  // live on `device` (the worker's choice: Comm::device()).
  // Returns InvalidArgument for a config ValidateModelConfig rejects.
  static Result<std::unique_ptr<FsdpModel>> Create(
      const ModelConfig& config, ModelRole role, int rank, int world_size,
      bool optimizer = true, const at::Device& device = at::Device(at::kCPU));

  const ModelConfig& config() const { return config_; }
  ModelRole role() const { return role_; }
  const reshard::ModelSpec& spec() const { return spec_; }
  const reshard::ShardMap& shard_map() const { return shard_map_; }
  int num_tensors() const { return static_cast<int>(spec_.tensors.size()); }
  int64_t piece() const { return piece_; }
  int rank() const { return rank_; }
  int world_size() const { return world_; }
  // Tensor t's place in the flat buffer: [offset(t), offset(t) + numel(t)).
  int64_t offset(int t) const { return offset_[t]; }
  int64_t numel(int t) const { return numel_[t]; }

  at::Tensor& params() { return params_; }  // [piece] f32, on device()
  at::Device device() const { return params_.device(); }
  const at::Tensor& params_const() const { return params_; }
  at::Tensor& exp_avg() { return exp_avg_; }
  at::Tensor& exp_avg_sq() { return exp_avg_sq_; }
  int64_t& adam_step() { return adam_step_; }

  // Fills the local piece with InitTensor(seed, name, shape) slices.
  void InitFromSeed(uint64_t seed);
  // Fills the local piece from a Hugging Face directory's weights, reading
  // only the element ranges this rank holds (a critic's score head starts
  // at zero). Returns the reader's errors.
  Status LoadFrom(const HfWeights& weights);
  // Copies into the local piece, tensor by tensor, what `other` returns
  // for this model's tensor names (the critic's trunk from the actor's
  // gathered buffer or units); undefined tensors are skipped.
  void CopyCommonFrom(
      const std::function<at::Tensor(const std::string&)>& other);

  // The full flat buffer [piece * world] from every rank's piece.
  Status Gather(Comm* comm, at::Tensor* full) const;
  // Makes *full (a gathered buffer) collect its gradient: full->grad() is
  // set to zeros and View then hands out leaf tensors sharing full's memory
  // whose gradients accumulate in place into their region of it (one flat
  // gradient buffer, like Megatron's). Viewing `full` itself would make
  // autograd build a zero tensor of the whole buffer for every tensor's
  // slice and add them all: memory traffic of tensors x model size per
  // backward, which dominates at hundreds of millions of parameters.
  static void TrackGradient(at::Tensor* full);
  // Tensor `name` as a view of a full flat buffer (a leaf whose gradient
  // lands in full->grad() after TrackGradient); undefined if unknown.
  at::Tensor View(const at::Tensor& full, const std::string& name) const;
  // Elements [at, at + n) of a flat buffer as `shape`: a view, or, when
  // buffer.grad() is defined (TrackGradient), a leaf on the same memory
  // whose gradient accumulates in place into that region of buffer.grad().
  static at::Tensor ViewAt(const at::Tensor& buffer, int64_t at, int64_t n,
                           const std::vector<int64_t>& shape);
  // Tensor t's elements held locally, as a view of a [piece] buffer
  // (params, moments or a gradient piece); empty if none.
  at::Tensor LocalSlice(const at::Tensor& piece_buffer, int t) const;

  // The sum of squares of gradient piece `grad`, in double. A chunk at a
  // time: the whole piece in double and its square were 4x its f32 bytes.
  static double SquaredNorm(const at::Tensor& grad);
  // AdamW on the local piece with gradient piece `grad`, scaled by
  // grad_scale first (clipping). Bias-corrected as torch.optim.Adam. With
  // offloaded moments (OffloadMoments) it hands back each chunk's moment
  // pages once it has stepped them.
  // REQUIRES: created with an optimizer.
  void AdamStep(const at::Tensor& grad, const OptimConfig& optim,
                double grad_scale);
  // Zeroes the moments and the step (a fresh optimizer).
  void ResetOptimizer();

  // Moves the two Adam moments into one file mapping in `dir`
  // (OffloadedTensor; trainer.offload_optimizer), keeping their values.
  // On a GPU the moments go to page-locked host memory instead (`dir` is
  // not used) and AdamStep copies each chunk's to the device and back
  // around its step (ZeRO-Offload's way).
  // From then on AdamStep hands each chunk's moment pages back to the
  // kernel once it has stepped them, ShardsForSave's moment shards hand
  // theirs back as the save reads them, and ReleaseMoments hands back
  // all: the moments are resident only a chunk at a time. Returns the
  // mapping's IOError (nothing changes then); OK if already offloaded.
  // REQUIRES: created with an optimizer.
  Status OffloadMoments(const std::string& dir);
  bool moments_offloaded() const {
    return moments_file_ != nullptr || moments_pinned_;
  }
  // Hands the offloaded moments' pages back (OK without offload). Returns
  // IOError as OffloadedTensor::Release; the values stay.
  Status ReleaseMoments() const;

  // The rank's shards for the store: params (and with `optimizer` the two
  // moments) under "<prefix>/<name>", "<prefix>/exp_avg/<name>",
  // "<prefix>/exp_avg_sq/<name>". The data points into this model (into
  // device memory, ShardData::on_gpu, for a model on a GPU).
  std::vector<statestore::ShardData> ShardsForSave(const std::string& prefix,
                                                   bool optimizer) const;

 private:
  FsdpModel() = default;
  ModelConfig config_;
  ModelRole role_ = ModelRole::kActor;
  int rank_ = 0;
  int world_ = 1;
  reshard::ModelSpec spec_;
  reshard::ShardMap shard_map_;
  std::vector<int64_t> offset_;  // Of tensor t in the flat buffer.
  std::vector<int64_t> numel_;
  int64_t piece_ = 0;
  at::Tensor params_, exp_avg_, exp_avg_sq_;
  // Under OffloadMoments: the mapping exp_avg_ and exp_avg_sq_ are views of.
  std::unique_ptr<OffloadedTensor> moments_file_;
  bool moments_pinned_ = false;  // On a GPU: offloaded to pinned memory.
  int64_t adam_step_ = 0;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_MODEL_FSDP_H_
