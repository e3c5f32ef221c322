// TrainConfig: everything a training run is configured with, in verl-like
// sections (model, task, actor, critic, rollout, algorithm, trainer,
// checkpoint, metrics). Every field has a built-in default, so an empty
// config is the demo run. Read from YAML (yaml-cpp); ToYaml writes the
// effective config back in the same form (hyctl train --print-config), and
// ParseConfigYaml(ToYaml(c)) == c.
//
// Thread-safety: plain values; the functions are pure.

#ifndef HY_TRAINER_CONFIG_CONFIG_H_
#define HY_TRAINER_CONFIG_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"
#include "hy/trainer/config/model_config.h"
#include "hy/trainer/config/task_config.h"

namespace hy::trainer {

// Prompts from JSONL files (see prompt_data.h) instead of the built-in
// task: tokenized with a Hugging Face tokenizer.json, scored by a rule.
struct DataConfig {
  std::vector<std::string> train_files;  // Empty: the task section's task.
  // Held-out prompts scored with greedy decoding before the first and
  // after the last iteration (and every trainer.test_freq); needs
  // train_files (the same tokenizer and reward).
  std::vector<std::string> val_files;
  std::string tokenizer;  // tokenizer.json or its directory; "": model.path.
  // exact_match | strict | format | exact_match+format | python
  std::string reward = "exact_match";
  // reward: python: a .py file and the function in it (verl's forms,
  // python/hy_reward/serve.py).
  std::string reward_file;
  std::string reward_function = "compute_score";
  bool require_eos = true;             // A response must end to be exact.
  bool shuffle = true;                 // A seeded permutation per epoch.
  bool enable_thinking = false;        // Passed to the chat template.
  // More chat template variables, a JSON object ("{}": none); each is
  // passed to the template as apply_chat_template's keyword arguments are.
  std::string chat_template_kwargs = "{}";
  int max_prompt_length = 256;         // Tokens; a longer prompt is an error.
  // Resume even if the files changed (the position is kept, the order is
  // the new files').
  bool allow_changed_dataset = false;
};

struct OptimConfig {
  double lr = 2e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // AdamW-style, decoupled.
  double grad_clip = 1.0;     // Max global L2 norm; <= 0 turns it off.
};

struct ActorConfig {
  OptimConfig optim;
  int ppo_epochs = 2;
  int ppo_mini_batch_size = 32;  // Samples per optimizer step.
  double clip_ratio = 0.2;       // epsilon of the clipped surrogate.
  double entropy_coeff = 0.0;
  // Truncated importance sampling against the training-inference mismatch
  // (rollout.engine vllm): each response token's policy loss is weighted
  // by min(exp(old_logp - engine_logp), tis_cap), the engine's log-prob
  // being that of the distribution it sampled from (verl's
  // tis_imp_ratio_cap). 0: off.
  double tis_cap = 0.0;
};

struct CriticConfig {
  OptimConfig optim;
  double cliprange_value = 0.5;
  double value_loss_coeff = 0.5;  // Reported loss scale only.
};

// rollout.engine: vllm (trainer/vllm/): the engines that generate the
// rollouts, either started by hyctl train (`engines` of them, on this
// host, each with the rollout's tensor parallelism) or running ones given
// by URL.
struct VllmConfig {
  // Running engines (http://host:port), each started with hy_vllm's
  // worker extension, backend and key (docs/cli.md says how); empty:
  // hyctl train starts `engines` of them. Their key: HY_VLLM_API_KEY.
  std::vector<std::string> urls;
  int engines = 1;
  int tensor_parallel_size = 1;  // Each engine's (vLLM's own TP).
  // The interpreter of vLLM's virtual environment; empty: HY_VLLM_PYTHON,
  // else the .venv-vllm/ scripts/install-deps.sh made beside the sources.
  std::string python;
  std::string dtype = "bfloat16";  // The engine's: bfloat16 | float32.
  double start_timeout_s = 600;    // Engine start to healthy.
  double request_timeout_s = 300;  // A rollout's or a sync's requests.
  int kv_cache_gib = 1;            // VLLM_CPU_KVCACHE_SPACE.
  int max_restarts = 5;            // Per engine, for the whole run.
  // What ranks on other hosts than the engines' send each sync (the
  // engines' host applies it to the weight file, which holds the version
  // the engines loaded last): on, only what changed since that version
  // (reshard's sparse delta: index/value pairs or an XOR delta, whichever
  // is smaller, else the full form); auto, the same where the link's
  // learned speed makes looking for changes pay; off, everything.
  std::string delta = "auto";
};

struct RolloutConfig {
  // hy: hy's own decoder on the rollout layout below (every rank);
  // vllm: vLLM engines (VllmConfig), fed the weights every iteration.
  std::string engine = "hy";
  int tensor_model_parallel_size = 2;  // t_g; must divide the world size.
  int batch_size = 64;                 // Prompts per iteration.
  int n = 1;                           // Responses per prompt (GRPO > 1).
  int response_length = 6;             // Max generated tokens.
  double temperature = 1.0;
  int top_k = 0;  // 0: no top-k filter.
  double top_p = 1.0;  // rollout.engine vllm only (nucleus sampling).
  VllmConfig vllm;
};

enum class AdvEstimator { kGae, kGrpo };

struct AlgorithmConfig {
  AdvEstimator adv_estimator = AdvEstimator::kGae;
  double gamma = 1.0;
  double lam = 1.0;
  bool norm_adv = true;  // Whiten advantages (GAE) / divide by std (GRPO).
  // In-reward KL penalty: estimator "kl" (k1), "abs", "mse" (k2),
  // "low_var_kl" (k3).
  std::string kl_penalty = "kl";
  std::string kl_ctrl_type = "fixed";  // fixed | adaptive
  double kl_coef = 0.01;
  double kl_target = 0.1;  // adaptive only
  double kl_horizon = 10000;
};

struct TrainerSection {
  int64_t total_iterations = 80;
  uint64_t seed = 1;
  std::string device = "cpu";  // cpu | cuda (device.h: ChooseDevice).
  int nproc = 4;               // Workers hyctl train spawns.
  // SFT warm-up on generated demonstrations before PPO (fresh runs only).
  int sft_steps = 15;
  int sft_batch_size = 64;
  double sft_lr = 3e-3;
  int test_freq = 0;  // Validate every N iterations too; 0: start and end.
  // Recompute each decoder layer's activations in backward instead of
  // keeping them (activation checkpointing; transformers'
  // gradient_checkpointing): the same gradients, the activations of one
  // layer at a time, about one more forward of compute per update.
  bool gradient_checkpointing = false;
  // FSDP by decoder layer (PyTorch FSDP wrapping each layer): a layer's
  // parameters are gathered just before it runs and freed after, its
  // gradient reduced right after its backward, and it is recomputed in
  // backward. Peak memory per rank: its shard + the embedding, final norm
  // and head + one layer, instead of the whole model and its gradient. The
  // same gradients bit for bit; more collectives per step.
  bool fsdp_per_layer = false;
  // Keeps the frozen reference model's piece in a file on the node's local
  // disk (beside its store; see offload.h) and hands its pages back to the
  // kernel before each update, so the update runs without it resident
  // (its bytes per rank less at the update's peak); the experience phase
  // reads it back (from the page cache, or the disk if the kernel reclaimed
  // it). The same values bit for bit.
  bool offload_reference = false;
  // Lets the rollout engine sleep through training, like vLLM's sleep
  // mode under verl: its bf16 weights (this rank's rollout shards) live in
  // a file on the node's local disk like the offloaded reference, and
  // their pages go back to the kernel once generation is done, so the
  // experience and update phases run without them resident; the next sync
  // writes its changes over them (faulting back in what it touches) and
  // generation reads them back. The sparse delta sync keeps working: the
  // previous copy is still there, in the file; the reshard executor's
  // last-sent copies (hy::reshard::Executor::Park) go to a file there too
  // between syncs. The same values bit for bit.
  bool offload_rollout = false;
  // Keeps the Adam moments (this rank's two f32 pieces of them, for the
  // actor and the critic) in a file on the node's local disk like the
  // offloaded reference, as DeepSpeed's ZeRO-Infinity keeps optimizer
  // state on NVMe: the optimizer step reads them back a chunk at a time
  // and hands each chunk's pages back once it has stepped them, and a
  // checkpoint reads them the same way, so no phase holds them resident
  // (their bytes, twice the parameter piece's, less at every phase's
  // peak). Costs a pass of page-cache (or disk) traffic over them per step
  // and per checkpoint. The same values bit for bit.
  bool offload_optimizer = false;
  // SIGINT / SIGTERM (a preemption): the workers finish the iteration
  // they are in, save and commit it, and exit 0; this bounds how long
  // hyctl train waits for that before it kills them (a second signal
  // kills at once).
  double stop_grace_seconds = 120;
};

struct CheckpointConfig {
  std::string store_root;  // Empty: runs/<timestamp> chosen by hyctl.
  int save_every = 10;     // Iterations between checkpoints; 0 = never.
  int keep_last = 2;       // Committed versions Gc keeps per rank store.
  int commit_timeout_ms = 60000;
  // Copies of each committed part on other nodes (the ring rule of
  // hy/recovery/node_layout.h); 0 for a store root on shared storage that
  // outlives any node.
  int replicas = 1;
  // A rank whose heartbeat stalls this long counts as failed.
  int heartbeat_timeout_ms = 5000;
  // The bound, MB, of each buffer a rank's checkpoint goes through: its
  // copies (kept between saves; none under read_in_place), each encoded
  // batch and a holder's replication buffers (replication messages are at
  // most 16 MiB, or this if smaller); 0: the store's defaults (1 GiB of
  // copies, 256 MiB batches, 64 MiB holder buffers). A larger part is
  // saved and replicated through them in pieces. A checkpoint in flight
  // with its replication holds several at once: at 494M parameters on 4
  // ranks the iteration it runs beside peaked 0.34-0.48 GB higher per rank
  // than the one before with 128 MB (one run; durable in 27.3 s).
  int staging_mb = 0;
  // A checkpoint reads the parameters and optimizer state in place in the
  // background, and the next update waits until it has (usually long done
  // by then: the rollout reads them only); false: they are copied through
  // staging before training goes on.
  bool read_in_place = true;
  // After a recovery, keep the versions of the failed generations instead
  // of dropping them once the new generation's first checkpoint is
  // replicated (hy/recovery/retention.h): for a post-mortem comparison.
  bool keep_superseded = false;
  // A checkpoint that cannot be saved (a full disk, a write error, a rank
  // that does not answer) is reported once, counted and training goes on;
  // after max_consecutive_failures failed in a row, "stop" ends the run
  // (its workers exit kExitCheckpointFailed, no restart: a restart cannot
  // make room) and "continue" trains on unsaved. The final checkpoint
  // failing ends the run so either way.
  std::string on_failure = "stop";
  int max_consecutive_failures = 3;
};

struct MetricsConfig {
  // Every rank serves its own exporter: -1: none; 0: a free port per rank;
  // P: port P + rank. Each is printed and entered in the store root's
  // prometheus-targets.json (file_sd).
  int port = -1;
  std::string bind = "127.0.0.1";  // Address the exporters listen on.
  std::string pushgateway;         // host:port; empty: no push. Grouping key
                                   // {job="hyctl_train", run, rank}.
};

struct TrainConfig {
  ModelConfig model;
  DataConfig data;
  // The demo: reverse 1-4 digit strings (PPO lifts the reward within
  // 80 iterations on 4 CPU ranks).
  TaskConfig task{{TaskKind::kReverse}, 1, 4};
  ActorConfig actor;
  CriticConfig critic;
  RolloutConfig rollout;
  AlgorithmConfig algorithm;
  TrainerSection trainer;
  CheckpointConfig checkpoint;
  MetricsConfig metrics;
};

// Reads a YAML document; absent keys keep their defaults. Returns
// InvalidArgument naming the key for an unknown key, a value of the wrong
// type, or YAML that does not parse; then ValidateConfig's errors.
//
// Keys are the struct fields above, by section ("actor.optim.lr",
// "task.kinds: [reverse, add]"), except algorithm.kl_ctrl.{type, kl_coef,
// target_kl, horizon} for kl_ctrl_type / kl_coef / kl_target / kl_horizon
// (verl's spelling), and one shorthand: `algorithm: grpo` (or gae) for
// algorithm.adv_estimator. `task.kinds: add` is `task.kinds: [add]`.
Result<TrainConfig> ParseConfigYaml(std::string_view yaml);

// Like ParseConfigYaml, but over `*config` (keys the document names
// replace the values there, the others stay) and without ValidateConfig,
// so that later overrides may still fix a value. Returns InvalidArgument as
// ParseConfigYaml does; `*config` may then be partly updated.
Status MergeConfigYaml(std::string_view yaml, TrainConfig* config);

// Applies one "section.key=value" override (hyctl train --set), with the
// key paths of ParseConfigYaml ("actor.optim.lr=3e-4", "algorithm=grpo",
// "task.kinds=[add]"); the value is read as YAML (empty: null, which only
// string keys accept, as ""). Does not validate. Returns InvalidArgument
// naming the key for a missing '=', an unknown key, a section given a
// scalar, or a value of the wrong type.
Status ApplyOverride(TrainConfig* config, std::string_view key_eq_value);

// The whole effective config as YAML (every key, sections in the order
// above, no comments). Doubles are written in the shortest form that reads
// back to the same value, so ParseConfigYaml(ToYaml(c)) gives c exactly
// when ValidateConfig(c) passes.
std::string ToYaml(const TrainConfig& config);

// Returns InvalidArgument naming the field for an out-of-range value
// (non-positive sizes, probabilities outside [0, 1], a double that is not
// finite, an unknown kl_penalty / kl_ctrl type / device, a
// ppo_mini_batch_size above rollout.batch_size * rollout.n, grpo with
// rollout.n < 2, a prompt plus response longer than
// model.max_position_embeddings, a bad metrics port or pushgateway, a model
// ValidateModelConfig rejects, a task ValidateTaskConfig rejects).
// World-size dependent checks (t_g divides the world) are the worker's.
Status ValidateConfig(const TrainConfig& config);

}  // namespace hy::trainer

#endif  // HY_TRAINER_CONFIG_CONFIG_H_
