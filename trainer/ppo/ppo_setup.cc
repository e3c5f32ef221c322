// PpoWorker's setup, before its first iteration: the device, the
// communicator (and the rollout's tensor-parallel size on a restart with
// another world), the actor, critic and reference models, the KL
// controller, the data sources and the run's tokens, the rollout engines
// (rollout_engine.h); and a fresh start's weights (seeded or from Hugging
// Face, the SFT warm-up, the critic's trunk from the actor's).

#include <algorithm>
#include <cstdlib>

#include "cpu_threads.h"
#include "hy/reshard/model_spec.h"
#include "hy/trainer/config/device.h"
#include "hy/trainer/hf/run_tokens.h"
#include "ppo_worker.h"

namespace hy::trainer {

std::string StateRulesYaml() {
  std::vector<reshard::SplitRule> rules;
  for (reshard::SplitRule r : reshard::ModelRules::Default().rules()) {
    r.pattern =
        "(?:actor|critic|reference)/(?:exp_avg/|exp_avg_sq/)?" + r.pattern;
    rules.push_back(std::move(r));
  }
  auto parsed = reshard::ModelRules::FromRules(std::move(rules));
  return parsed.ok() ? parsed.value().ToYaml() : std::string();
}

Status PpoWorker::Setup() {
  HY_RETURN_IF_ERROR(ResolveModelPath(&config_.model, &hf_config_text_));
  HY_RETURN_IF_ERROR(ValidateConfig(config_));
  // The one place the device is decided: Comm takes it (the GPU of this
  // rank), and the models, passes and buffers follow Comm::device().
  HY_ASSIGN_OR_RETURN(const Device device,
                      ChooseDevice(config_.trainer.device));
  if (device == Device::kCuda) {
    if (config_.trainer.offload_rollout) {
      return Status::InvalidArgument(
          "trainer.offload_rollout maps the rollout weights to a file in "
          "host memory; on trainer.device cuda they live on the GPU: set it "
          "false");
    }
    // The store reads host memory in place; device shards are copied into
    // its page-locked staging instead (ShardData::on_gpu).
    config_.checkpoint.read_in_place = false;
  }
  if (config_.checkpoint.store_root.empty()) {
    return Status::InvalidArgument("checkpoint.store_root is empty");
  }
  UseOneCpuThread();  // Deterministic kernels, one core per rank.
  FitTensorParallel();
  HY_RETURN_IF_ERROR(MakeComm(device));
  HY_RETURN_IF_ERROR(MakeModels());
  rules_yaml_ = StateRulesYaml();
  HY_RETURN_IF_ERROR(MakeSources());
  HY_RETURN_IF_ERROR(MakeEngines());
  const int world = comm_->world_size();
  const at::Device on = comm_->device();
  Log("rank 0 of " + std::to_string(world) + " on " + on.str() + ": actor " +
      std::to_string(actor_->spec().TotalBytes() / 4) +
      " parameters, training layout fsdp=" + std::to_string(world) +
      ", rollout layout tp=" + std::to_string(comm_->tp_size()) +
      ",dp=" + std::to_string(comm_->dp_size()) + " (bf16)");
  return Status::OK();
}

void PpoWorker::FitTensorParallel() {
  const char* world_env = std::getenv("WORLD_SIZE");
  const int env_world = world_env != nullptr ? std::atoi(world_env) : 0;
  int& tp = config_.rollout.tensor_model_parallel_size;
  // Under torchrun the world may change at any start (--nnodes=MIN:MAX).
  const bool elastic = std::getenv("TORCHELASTIC_RUN_ID") != nullptr;
  if ((options_.resume || IsRestart() || elastic) && env_world > 0 &&
      env_world % tp != 0) {
    // A restart on fewer (or more) nodes: the largest TP group that fits.
    const int wanted = tp;
    while (env_world % tp != 0 ||
           !ValidateTensorParallel(config_.model, tp).ok()) {
      --tp;
    }
    if (options_.log && std::getenv("RANK") != nullptr &&
        std::atoi(std::getenv("RANK")) == 0) {
      options_.log("rollout tp " + std::to_string(wanted) +
                   " does not divide " + std::to_string(env_world) +
                   " ranks; rolling out with tp " + std::to_string(tp));
    }
  }
}

Status PpoWorker::MakeComm(Device device) {
  CommOptions co;
  co.tp_size = config_.rollout.tensor_model_parallel_size;
  co.timeout_ms =
      std::max<int64_t>(120000, config_.checkpoint.commit_timeout_ms);
  if (config_.rollout.engine == "vllm") {
    // The other ranks wait in a collective while rank 0 waits out an
    // engine's restart and redoes its share.
    const VllmConfig& vc = config_.rollout.vllm;
    co.timeout_ms = std::max<int64_t>(
        co.timeout_ms,
        static_cast<int64_t>((vc.start_timeout_s + 2 * vc.request_timeout_s) *
                             1000 * (vc.max_restarts + 1)));
  }
  co.device = device;
  HY_ASSIGN_OR_RETURN(comm_, Comm::FromEnv(co));
  return Status::OK();
}

Status PpoWorker::MakeModels() {
  const int rank = comm_->rank();
  const int world = comm_->world_size();
  const at::Device on = comm_->device();
  HY_ASSIGN_OR_RETURN(
      actor_, FsdpModel::Create(config_.model, ModelRole::kActor, rank, world,
                                /*optimizer=*/true, on));
  // GRPO's advantages need no value model: no critic (its parameters, Adam
  // moments, checkpoint part and replica are a whole model's worth).
  if (config_.algorithm.adv_estimator == AdvEstimator::kGae) {
    HY_ASSIGN_OR_RETURN(
        critic_, FsdpModel::Create(config_.model, ModelRole::kCritic, rank,
                                   world, /*optimizer=*/true, on));
  }
  // The frozen reference: parameters only, no Adam moments.
  HY_ASSIGN_OR_RETURN(
      ref_, FsdpModel::Create(config_.model, ModelRole::kActor, rank, world,
                              /*optimizer=*/false, on));
  if (config_.trainer.fsdp_per_layer) {
    actor_units_ = std::make_unique<FsdpUnits>(actor_.get());
    if (critic_ != nullptr) {
      critic_units_ = std::make_unique<FsdpUnits>(critic_.get());
    }
    ref_units_ = std::make_unique<FsdpUnits>(ref_.get());
  }
  const AlgorithmConfig& ac = config_.algorithm;
  if (ac.kl_ctrl_type == "adaptive") {
    HY_ASSIGN_OR_RETURN(
        KlController k,
        KlController::Adaptive(ac.kl_coef, ac.kl_target, ac.kl_horizon));
    kl_ = std::make_unique<KlController>(k);
  } else {
    kl_ = std::make_unique<KlController>(KlController::Fixed(ac.kl_coef));
  }
  return Status::OK();
}

Status PpoWorker::MakeSources() {
  if (config_.data.train_files.empty()) {
    source_ = MakeTaskSource(config_.task, config_.trainer.seed,
                             config_.rollout.batch_size,
                             config_.trainer.sft_batch_size);
  } else {
    HY_ASSIGN_OR_RETURN(
        source_,
        MakeDatasetSource(config_.data, config_.model.path,
                          HfModelEosIds(config_.model.path, hf_config_text_),
                          config_.trainer.seed, config_.model.vocab_size));
    if (!config_.data.val_files.empty()) {
      DataConfig val = config_.data;
      val.train_files = config_.data.val_files;
      val.shuffle = false;
      HY_ASSIGN_OR_RETURN(
          val_source_,
          MakeDatasetSource(val, config_.model.path,
                            HfModelEosIds(config_.model.path, hf_config_text_),
                            config_.trainer.seed, config_.model.vocab_size));
    }
  }
  RunTokens tokens;
  tokens.spec = source_->token_spec();
  if (!source_->tokenizer_path().empty()) {
    HY_ASSIGN_OR_RETURN(
        tokens, DescribeRun(source_->token_spec(), source_->tokenizer_path()));
  }
  tokens_text_ = RunTokensJson(tokens);
  const int longest =
      std::max(source_->max_prompt_tokens(),
               val_source_ ? val_source_->max_prompt_tokens() : 0) +
      config_.rollout.response_length;
  if (longest > config_.model.max_position_embeddings) {
    return Status::InvalidArgument(
        "model.max_position_embeddings " +
        std::to_string(config_.model.max_position_embeddings) +
        " cannot hold the longest prompt (" +
        std::to_string(source_->max_prompt_tokens()) +
        " tokens) plus rollout.response_length");
  }
  return Status::OK();
}

Status PpoWorker::MakeEngines() {
  RolloutContext ctx;
  ctx.config = &config_;
  ctx.comm = comm_.get();
  ctx.actor = actor_.get();
  ctx.source = source_.get();
  ctx.hosts = &hosts_;
  ctx.run_id = &run_id_;
  ctx.node_directory = [this] { return NodeDirectory(); };
  ctx.log = [this](const std::string& line) { Log(line); };
  ctx.metrics = options_.metrics;
  HY_ASSIGN_OR_RETURN(rollout_,
                      MakeRolloutEngine(config_.rollout.engine, ctx));
  if (config_.rollout.engine != "hy") {
    HY_ASSIGN_OR_RETURN(decoder_, MakeRolloutEngine("hy", ctx));
  }
  return Status::OK();
}

Status PpoWorker::InitFresh() {
  if (config_.model.path.empty()) {
    actor_->InitFromSeed(config_.trainer.seed);
  } else {
    HY_ASSIGN_OR_RETURN(auto weights,
                        HfWeights::Open(config_.model.path, config_.model));
    HY_RETURN_IF_ERROR(actor_->LoadFrom(*weights));
  }
  HY_RETURN_IF_ERROR(SftWarmup());
  ref_->params().copy_(actor_->params());
  start_iteration_ = 0;
  data_position_ = 0;
  if (critic_ == nullptr) return Status::OK();
  critic_->InitFromSeed(config_.trainer.seed + 1);
  // The critic's trunk starts as the actor's, a unit at a time by layer.
  const int units = actor_units_ != nullptr ? actor_units_->num_units() : 1;
  for (int u = 0; u < units; ++u) {
    at::Tensor buffer;
    HY_RETURN_IF_ERROR(actor_units_ != nullptr
                           ? actor_units_->Gather(comm_.get(), u, &buffer)
                           : actor_->Gather(comm_.get(), &buffer));
    critic_->CopyCommonFrom([&](const std::string& name) {
      return actor_units_ != nullptr ? actor_units_->View(buffer, u, name)
                                     : actor_->View(buffer, name);
    });
  }
  return Status::OK();
}

}  // namespace hy::trainer
