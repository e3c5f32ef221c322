// HyDecoderEngine: rollout.engine hy, hy's own decoder. LoadWeights
// reshards the actor from the training layout (fsdp=N) to the rollout
// layout (tp x dp, bf16) with hy's planner and executor (NCCL on a GPU);
// Generate decodes each dp group's share (rollout.h, GenerateResponses)
// and gathers every group's responses on every rank. The worker also
// validates with one of these whatever rollout.engine is.
//
// Ownership: owns the plan, its executor and the rollout shards (under
// trainer.offload_rollout a file mapping in the node directory); reads the
// worker's through its RolloutContext.
//
// Internal to hy_trainer_ppo. Thread-safety: one thread.

#ifndef HY_TRAINER_PPO_HY_DECODER_ENGINE_H_
#define HY_TRAINER_PPO_HY_DECODER_ENGINE_H_

#include <memory>
#include <vector>

#include "hy/reshard/executor.h"
#include "hy/reshard/nccl_executor.h"
#include "hy/trainer/model/offload.h"
#include "rollout.h"
#include "rollout_engine.h"

namespace hy::trainer {

class HyDecoderEngine : public RolloutEngine {
 public:
  // REQUIRES: ctx's pointers are set (RolloutContext).
  explicit HyDecoderEngine(const RolloutContext& ctx);
  ~HyDecoderEngine() override;

  // Reshards the actor into the rollout shards (planned on the first
  // call). Reports reshard_ms (the slowest rank's), reshard_bytes and
  // reshard_logical_bytes (summed over ranks). The version is not kept.
  Status LoadWeights(int64_t weight_version, IterationReport* report) override;
  // Leaves engine_logp and report as they are.
  Result<at::Tensor> Generate(const std::vector<Prompt>& items,
                              int64_t prompt_len, uint64_t iteration,
                              const RolloutConfig& rc, at::Tensor* engine_logp,
                              IterationReport* report) override;
  // trainer.offload_rollout: hands the rollout shards' pages back to the
  // kernel; an error is logged (the values stay).
  void Release() override;

 private:
  // The plan, its executor, the shards and the weights bound to them.
  Status Plan();
  // This rank's rollout shards (bf16): views of one file mapping in the
  // node directory under trainer.offload_rollout, else of device memory.
  // Returns the mapping's IOError.
  Status AllocateShards();
  // trainer.offload_rollout: parks the executor (its last-sent copies to a
  // file in the node directory) until the next sync; an error is logged
  // (the next sync then sends everything).
  void Park();
  // Collective: the reshard's stats over the ranks into the report.
  Status ReportStats(const reshard::ReshardStats& stats,
                     IterationReport* report);

  RolloutContext ctx_;
  std::shared_ptr<const reshard::TransferPlan> plan_;
  std::unique_ptr<reshard::Executor> executor_;           // On the CPU.
  std::unique_ptr<reshard::NcclExecutor> nccl_executor_;  // On a GPU.
  std::unique_ptr<OffloadedTensor> offload_;  // Null unless offloaded.
  std::vector<at::Tensor> shards_;  // Per actor tensor, bf16.
  Weights weights_;                 // Bound to shards_.
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_PPO_HY_DECODER_ENGINE_H_
