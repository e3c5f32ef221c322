// The table of TrainConfig's keys (see config_fields.h).

#include "config_fields.h"

#include "hy/trainer/config/task_config.h"

namespace hy::trainer::internal {

namespace {

constexpr Range OneOf(const char* want, const char* one_of) {
  Range r;
  r.want = want;
  r.one_of = one_of;
  return r;
}
constexpr Range kAny;
constexpr Range kPositive{"must be positive", 0, true};
constexpr Range kNonNegative{"must be >= 0", 0};
constexpr Range kAtLeast1{"must be >= 1", 1};
constexpr Range kUnit{"must be in [0, 1]", 0, false, 1};
constexpr Range kUnitPositive{"must be in (0, 1]", 0, true, 1};
constexpr Range kBeta{"must be in [0, 1)", 0, false, 1, true};
constexpr Range kPort{"must be in [-1, 65535] (-1: off, 0: any free port)", -1,
                      false, 65535};
static_assert(kMaxTaskDigits == 32, "kDigits' message");
constexpr Range kDigits{"must be in [1, 32]", 1, false, kMaxTaskDigits};
constexpr Range kKlPenalty =
    OneOf("must be kl, k1, abs, mse, k2, low_var_kl or k3",
          "|kl|k1|abs|mse|k2|low_var_kl|k3|");
constexpr Range kKlCtrl =
    OneOf("must be fixed or adaptive", "|fixed|adaptive|");
constexpr Range kDevice = OneOf("must be cpu or cuda", "|cpu|cuda|");

// Appends one key to the table: add(path, &member, range).
struct Adder {
  std::vector<Field>* f;
  void operator()(std::string path, FieldPtr ptr, Range range = kAny) const {
    f->push_back({std::move(path), ptr, range});
  }
};

// model.*: the architecture (ranges: ValidateModelConfig's).
void ModelFields(ModelConfig* m, const Adder& add) {
  add("model.path", &m->path);
  add("model.architecture", &m->architecture);
  add("model.vocab_size", &m->vocab_size);
  add("model.hidden_size", &m->hidden_size);
  add("model.intermediate_size", &m->intermediate_size);
  add("model.num_layers", &m->num_layers);
  add("model.num_heads", &m->num_heads);
  add("model.num_kv_heads", &m->num_kv_heads);
  add("model.rope_theta", &m->rope_theta);
  add("model.rms_norm_eps", &m->rms_norm_eps);
  add("model.max_position_embeddings", &m->max_position_embeddings);
  add("model.head_dim", &m->head_dim_override);
  add("model.attention_bias", &m->attention_bias);
  add("model.mlp_bias", &m->mlp_bias);
  add("model.tie_word_embeddings", &m->tie_word_embeddings);
  add("model.rope_scaling.rope_type", &m->rope_scaling_type);
  add("model.rope_scaling.factor", &m->rope_scaling_factor);
  add("model.rope_scaling.low_freq_factor", &m->rope_low_freq_factor);
  add("model.rope_scaling.high_freq_factor", &m->rope_high_freq_factor);
  add("model.rope_scaling.original_max_position_embeddings",
      &m->rope_original_max_position_embeddings);
  add("model.torch_dtype", &m->torch_dtype);
}

// task.*: the arithmetic task's kinds and digits.
void TaskFields(TaskConfig* t, const Adder& add) {
  add("task.kinds", &t->kinds);
  add("task.min_digits", &t->min_digits, kDigits);
  add("task.max_digits", &t->max_digits, kDigits);
}

// data.*: the prompt files, tokenizer and reward.
void DataFields(DataConfig* d, const Adder& add) {
  add("data.train_files", &d->train_files);
  add("data.val_files", &d->val_files);
  add("data.tokenizer", &d->tokenizer);
  add("data.reward", &d->reward,
      OneOf("must be exact_match, strict, format, exact_match+format or "
            "python",
            "|exact_match|strict|format|exact_match+format|python|"));
  add("data.reward_file", &d->reward_file);
  add("data.reward_function", &d->reward_function);
  add("data.require_eos", &d->require_eos);
  add("data.shuffle", &d->shuffle);
  add("data.enable_thinking", &d->enable_thinking);
  add("data.chat_template_kwargs", &d->chat_template_kwargs);
  add("data.max_prompt_length", &d->max_prompt_length, kAtLeast1);
  add("data.allow_changed_dataset", &d->allow_changed_dataset);
}

// <s>.optim.*: one model's AdamW.
void OptimFields(const std::string& s, OptimConfig* o, const Adder& add) {
  add(s + ".optim.lr", &o->lr, kPositive);
  add(s + ".optim.beta1", &o->beta1, kBeta);
  add(s + ".optim.beta2", &o->beta2, kBeta);
  add(s + ".optim.eps", &o->eps, kPositive);
  add(s + ".optim.weight_decay", &o->weight_decay, kNonNegative);
  add(s + ".optim.grad_clip", &o->grad_clip);  // <= 0: off.
}

// actor.*: its optimizer, then PPO's knobs.
void ActorFields(ActorConfig* a, const Adder& add) {
  OptimFields("actor", &a->optim, add);
  add("actor.ppo_epochs", &a->ppo_epochs, kAtLeast1);
  add("actor.ppo_mini_batch_size", &a->ppo_mini_batch_size, kAtLeast1);
  add("actor.clip_ratio", &a->clip_ratio, kPositive);
  add("actor.entropy_coeff", &a->entropy_coeff, kNonNegative);
  add("actor.tis_cap", &a->tis_cap, kNonNegative);  // 0: off.
}

// critic.*: its optimizer, then the value loss.
void CriticFields(CriticConfig* c, const Adder& add) {
  OptimFields("critic", &c->optim, add);
  add("critic.cliprange_value", &c->cliprange_value, kPositive);
  add("critic.value_loss_coeff", &c->value_loss_coeff, kNonNegative);
}

// rollout.*: generation, and the vLLM engine's rollout.vllm.*.
void RolloutFields(RolloutConfig* r, const Adder& add) {
  add("rollout.tensor_model_parallel_size", &r->tensor_model_parallel_size,
      kAtLeast1);
  add("rollout.batch_size", &r->batch_size, kAtLeast1);
  add("rollout.n", &r->n, kAtLeast1);
  add("rollout.response_length", &r->response_length, kAtLeast1);
  add("rollout.temperature", &r->temperature, kPositive);
  add("rollout.top_k", &r->top_k, kNonNegative);  // 0: off.
  add("rollout.top_p", &r->top_p, kUnitPositive);
  add("rollout.engine", &r->engine, OneOf("must be hy or vllm", "|hy|vllm|"));
  add("rollout.vllm.urls", &r->vllm.urls);
  add("rollout.vllm.engines", &r->vllm.engines, kAtLeast1);
  add("rollout.vllm.tensor_parallel_size", &r->vllm.tensor_parallel_size,
      kAtLeast1);
  add("rollout.vllm.python", &r->vllm.python);
  add("rollout.vllm.dtype", &r->vllm.dtype,
      OneOf("must be bfloat16 or float32", "|bfloat16|float32|"));
  add("rollout.vllm.start_timeout_s", &r->vllm.start_timeout_s, kPositive);
  add("rollout.vllm.request_timeout_s", &r->vllm.request_timeout_s, kPositive);
  add("rollout.vllm.kv_cache_gib", &r->vllm.kv_cache_gib, kAtLeast1);
  add("rollout.vllm.max_restarts", &r->vllm.max_restarts, kNonNegative);
  add("rollout.vllm.delta", &r->vllm.delta,
      OneOf("must be auto, on or off", "|auto|on|off|"));
}

// algorithm.*: advantages and the KL penalty.
void AlgorithmFields(AlgorithmConfig* a, const Adder& add) {
  add("algorithm.adv_estimator", &a->adv_estimator);
  add("algorithm.gamma", &a->gamma, kUnit);
  add("algorithm.lam", &a->lam, kUnit);
  add("algorithm.norm_adv", &a->norm_adv);
  add("algorithm.kl_penalty", &a->kl_penalty, kKlPenalty);
  add("algorithm.kl_ctrl.type", &a->kl_ctrl_type, kKlCtrl);
  add("algorithm.kl_ctrl.kl_coef", &a->kl_coef, kNonNegative);
  add("algorithm.kl_ctrl.target_kl", &a->kl_target, kPositive);
  add("algorithm.kl_ctrl.horizon", &a->kl_horizon, kPositive);
}

// trainer.*: the run: iterations, devices, SFT, memory.
void TrainerFields(TrainerSection* t, const Adder& add) {
  add("trainer.total_iterations", &t->total_iterations, kAtLeast1);
  add("trainer.seed", &t->seed);
  add("trainer.device", &t->device, kDevice);
  add("trainer.nproc", &t->nproc, kAtLeast1);
  add("trainer.sft_steps", &t->sft_steps, kNonNegative);
  add("trainer.sft_batch_size", &t->sft_batch_size, kAtLeast1);
  add("trainer.sft_lr", &t->sft_lr, kPositive);
  add("trainer.test_freq", &t->test_freq, kNonNegative);
  add("trainer.gradient_checkpointing", &t->gradient_checkpointing);
  add("trainer.fsdp_per_layer", &t->fsdp_per_layer);
  add("trainer.offload_reference", &t->offload_reference);
  add("trainer.offload_rollout", &t->offload_rollout);
  add("trainer.offload_optimizer", &t->offload_optimizer);
  add("trainer.stop_grace_seconds", &t->stop_grace_seconds, kPositive);
}

// checkpoint.*: the store and its commits.
void CheckpointFields(CheckpointConfig* k, const Adder& add) {
  add("checkpoint.store_root", &k->store_root);
  add("checkpoint.save_every", &k->save_every, kNonNegative);  // 0: never.
  add("checkpoint.keep_last", &k->keep_last, kAtLeast1);
  add("checkpoint.commit_timeout_ms", &k->commit_timeout_ms, kAtLeast1);
  add("checkpoint.replicas", &k->replicas, kNonNegative);
  add("checkpoint.heartbeat_timeout_ms", &k->heartbeat_timeout_ms, kAtLeast1);
  add("checkpoint.staging_mb", &k->staging_mb, kNonNegative);
  add("checkpoint.read_in_place", &k->read_in_place);
  add("checkpoint.keep_superseded", &k->keep_superseded);
  add("checkpoint.on_failure", &k->on_failure,
      OneOf("must be stop or continue", "|stop|continue|"));
  add("checkpoint.max_consecutive_failures", &k->max_consecutive_failures,
      kAtLeast1);
}

// metrics.*: the Prometheus endpoint.
void MetricsFields(MetricsConfig* m, const Adder& add) {
  add("metrics.port", &m->port, kPort);
  add("metrics.bind", &m->bind);
  add("metrics.pushgateway", &m->pushgateway);
}
}  // namespace

std::vector<Field> Fields(TrainConfig* c) {
  std::vector<Field> f;
  const Adder add{&f};
  ModelFields(&c->model, add);
  TaskFields(&c->task, add);
  DataFields(&c->data, add);
  ActorFields(&c->actor, add);
  CriticFields(&c->critic, add);
  RolloutFields(&c->rollout, add);
  AlgorithmFields(&c->algorithm, add);
  TrainerFields(&c->trainer, add);
  CheckpointFields(&c->checkpoint, add);
  MetricsFields(&c->metrics, add);
  return f;
}
}  // namespace hy::trainer::internal
