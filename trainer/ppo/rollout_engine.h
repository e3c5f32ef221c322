// RolloutEngine: what generates the rollouts of a PPO iteration, behind one
// small interface: take the actor's current weights as a weight version
// (LoadWeights), then generate a batch with them (Generate). Two engines
// implement it, chosen by rollout.engine through MakeRolloutEngine: "hy",
// hy's own decoder over the actor resharded to the rollout layout
// (hy_decoder_engine.h), and "vllm", vLLM engines that load the weights
// from a shared file (vllm_engine.h).
//
// Ownership: the worker (PpoWorker) owns its engines and everything a
// RolloutContext points to; it outlives them. An engine owns its own state
// (plans, executors, buffers, clients).
//
// Internal to hy_trainer_ppo. Thread-safety: one thread; LoadWeights and
// Generate are collective: every rank calls them in the same order.

#ifndef HY_TRAINER_PPO_ROLLOUT_ENGINE_H_
#define HY_TRAINER_PPO_ROLLOUT_ENGINE_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hy/common/result.h"
#include "hy/trainer/config/config.h"
#include "hy/trainer/data/prompt_source.h"
#include "hy/trainer/model/comm.h"
#include "hy/trainer/model/fsdp.h"
#include "hy/trainer/ppo/worker.h"

namespace hy::trainer {

// What an engine reads of the worker that builds it. Not owned: every
// pointer is the worker's and outlives the engine. The pointees are read
// when used (the worker fills hosts and run_id after building its engines).
struct RolloutContext {
  const TrainConfig* config = nullptr;
  Comm* comm = nullptr;
  FsdpModel* actor = nullptr;  // Read only: its spec and local pieces.
  const PromptSource* source = nullptr;   // Its token spec.
  const std::vector<std::string>* hosts = nullptr;  // Hostname per rank.
  const std::string* run_id = nullptr;  // "" when the environment names none.
  // This rank's node directory (where offloaded state's files go).
  std::function<std::string()> node_directory;
  std::function<void(const std::string&)> log;  // Rank 0's lines.
  const metrics::HyMetrics* metrics = nullptr;  // May be null.
};

class RolloutEngine {
 public:
  virtual ~RolloutEngine() = default;

  // The actor's current weights become `weight_version` in the engine; the
  // sync's figures go into `report`. Collective; every rank returns the
  // same error.
  virtual Status LoadWeights(int64_t weight_version,
                             IterationReport* report) = 0;

  // Responses [items, R] (int64, pad after EOS) to `items`, sampled with
  // `rc` and the seeds of `iteration`, the same on every rank. An engine
  // that computes its own log-probs of them puts them in *engine_logp
  // ([items, R] f32); hy's decoder leaves it as it is (it may be null).
  // Collective.
  // REQUIRES: LoadWeights succeeded; every item has at most prompt_len
  // tokens.
  virtual Result<at::Tensor> Generate(const std::vector<Prompt>& items,
                                      int64_t prompt_len, uint64_t iteration,
                                      const RolloutConfig& rc,
                                      at::Tensor* engine_logp,
                                      IterationReport* report) = 0;

  // After generation: hands back memory that stays idle until the next
  // LoadWeights writes over it. Local; errors are logged.
  virtual void Release() {}

  // What a checkpoint records of the engine, into its trainer.state.
  virtual void SaveState(nlohmann::json* state) const { (void)state; }

  // A resume at `step` from a checkpoint whose trainer.state is `state`.
  // May throw nlohmann::json's exceptions for a malformed state.
  virtual void Restore(int64_t step, const nlohmann::json& state) {
    (void)step;
    (void)state;
  }
};

// The engine rollout.engine names: "hy" or "vllm"; InvalidArgument for
// any other name. Builds nothing collective (engines plan on their first
// LoadWeights).
// REQUIRES: every pointer of ctx is set (hosts and run_id may be empty
// yet).
Result<std::unique_ptr<RolloutEngine>> MakeRolloutEngine(
    const std::string& name, const RolloutContext& ctx);

}  // namespace hy::trainer

#endif  // HY_TRAINER_PPO_ROLLOUT_ENGINE_H_
