// MakeRolloutEngine: rollout.engine's name to its engine.

#include "rollout_engine.h"

#include "hy_decoder_engine.h"
#include "vllm_engine.h"

namespace hy::trainer {

Result<std::unique_ptr<RolloutEngine>> MakeRolloutEngine(
    const std::string& name, const RolloutContext& ctx) {
  if (name == "hy") {
    return std::unique_ptr<RolloutEngine>(
        std::make_unique<HyDecoderEngine>(ctx));
  }
  if (name == "vllm") {
    return std::unique_ptr<RolloutEngine>(std::make_unique<VllmEngine>(ctx));
  }
  return Status::InvalidArgument("rollout.engine '" + name +
                                 "': not an engine (hy or vllm)");
}

}  // namespace hy::trainer
