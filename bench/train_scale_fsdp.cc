#include "train_scale_fsdp.h"

#include <malloc.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "hy/common/process_memory.h"
#include "hy/reshard/c10d_transport.h"
#include "hy/trainer/model/comm.h"
#include "hy/trainer/model/fsdp.h"
#include "hy/trainer/model/fsdp_pass.h"
#include "hy/trainer/model/fsdp_unit.h"
#include "hy/trainer/model/model.h"
#include "ppo.h"

namespace hy::bench {

using trainer::FsdpModel;
using trainer::FsdpPass;
using trainer::FsdpUnits;
using trainer::ModelRole;

Result<FsdpStepResult> MeasureFsdpStep(const trainer::ModelConfig& config,
                                       int64_t batch, int64_t seq) {
  HY_ASSIGN_OR_RETURN(auto server, reshard::C10dStoreServer::Start(0, 60000));
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(server->port()).c_str(), 1);
  setenv("RANK", "0", 1);
  setenv("LOCAL_RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  trainer::CommOptions co;
  co.timeout_ms = 600000;
  HY_ASSIGN_OR_RETURN(auto comm, trainer::Comm::FromEnv(co));
  HY_ASSIGN_OR_RETURN(auto model,
                      FsdpModel::Create(config, ModelRole::kActor, 0, 1));
  model->InitFromSeed(1);
  model->exp_avg().fill_(1e-3);  // Touched, as after a first step.
  model->exp_avg_sq().fill_(1e-6);
  FsdpUnits units(model.get());
  FsdpStepResult result;
  result.state_mb = model->piece() * 12 / 1e6;
  result.root_mb = units.numel(0) * 4 / 1e6;
  result.layer_mb = units.numel(FsdpUnits::LayerUnit(0)) * 4 / 1e6;
  at::manual_seed(2);
  at::Tensor tokens = at::randint(config.vocab_size, {batch, seq}, at::kLong);
  at::Tensor valid = at::ones({batch, seq}, at::kBool);
  at::Tensor positions = at::arange(seq, at::kLong).repeat({batch, 1});
  trainer::OptimConfig optim;
  // By layer first: one-time costs (allocator, Gloo buffers) count
  // against it, not against the whole model.
  for (bool by_layer : {true, false}) {
    malloc_trim(0);
    const int64_t before = ResidentBytes();
    ResetPeakResident();
    const auto start = std::chrono::steady_clock::now();
    {
      HY_ASSIGN_OR_RETURN(
          auto pass, FsdpPass::Begin(model.get(), by_layer ? &units : nullptr,
                                     comm.get(), true));
      HY_ASSIGN_OR_RETURN(trainer::Weights w, pass->Bind());
      HY_ASSIGN_OR_RETURN(
          at::Tensor hidden,
          trainer::Trunk(config, w, tokens, positions, valid,
                         trainer::TpContext{}, nullptr, false, pass->runner()));
      HY_ASSIGN_OR_RETURN(at::Tensor logits,
                          trainer::LmHead(w, hidden.narrow(1, 0, seq - 1),
                                          trainer::TpContext{}));
      at::Tensor logp = trainer::TokenLogProbs(
          logits, tokens.narrow(1, 1, seq - 1), 1.0, nullptr);
      at::Tensor loss = -logp.mean();
      HY_RETURN_IF_ERROR(pass->Backward(loss));
      HY_ASSIGN_OR_RETURN(at::Tensor piece, pass->GradientPiece());
      model->AdamStep(piece, optim, 1.0);
    }
    FsdpStepRow row;
    row.by_layer = by_layer;
    row.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    row.peak_growth_mb = (PeakResidentBytes() - before) / 1e6;
    result.rows.push_back(row);
  }
  return result;
}

}  // namespace hy::bench
