// TrainConfig's YAML: printing, and exact round trips of every field
// (parsing what was printed gives the same config). Bad input, overrides
// and validation: config_input_test.cc.

#include "hy/trainer/config/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace hy::trainer {
namespace {

std::string D(double v) {  // Exact: hex float.
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", v);
  return buf;
}

std::string S(int64_t v) { return std::to_string(v); }

// Every field of a TrainConfig as (name, exact text), written out here
// independently of config.cc's table.
std::vector<std::pair<std::string, std::string>> FieldValues(
    const TrainConfig& c) {
  std::string kinds;
  for (TaskKind k : c.task.kinds) kinds += std::string(TaskKindName(k)) + ",";
  std::vector<std::pair<std::string, std::string>> v = {
      {"model.vocab_size", S(c.model.vocab_size)},
      {"model.hidden_size", S(c.model.hidden_size)},
      {"model.intermediate_size", S(c.model.intermediate_size)},
      {"model.num_layers", S(c.model.num_layers)},
      {"model.num_heads", S(c.model.num_heads)},
      {"model.num_kv_heads", S(c.model.num_kv_heads)},
      {"model.rope_theta", D(c.model.rope_theta)},
      {"model.rms_norm_eps", D(c.model.rms_norm_eps)},
      {"model.max_position_embeddings", S(c.model.max_position_embeddings)},
      {"model.path", c.model.path},
      {"model.architecture", c.model.architecture},
      {"model.head_dim", S(c.model.head_dim_override)},
      {"model.attention_bias", c.model.attention_bias ? "true" : "false"},
      {"model.mlp_bias", c.model.mlp_bias ? "true" : "false"},
      {"model.tie_word_embeddings",
       c.model.tie_word_embeddings ? "true" : "false"},
      {"model.rope_scaling.rope_type", c.model.rope_scaling_type},
      {"model.rope_scaling.factor", D(c.model.rope_scaling_factor)},
      {"model.rope_scaling.low_freq_factor", D(c.model.rope_low_freq_factor)},
      {"model.rope_scaling.high_freq_factor", D(c.model.rope_high_freq_factor)},
      {"model.rope_scaling.original_max_position_embeddings",
       S(c.model.rope_original_max_position_embeddings)},
      {"model.torch_dtype", c.model.torch_dtype},
      {"data.train_files",
       [&] {
         std::string f;
         for (const auto& x : c.data.train_files) f += x + ",";
         return f;
       }()},
      {"data.val_files",
       [&] {
         std::string f;
         for (const auto& x : c.data.val_files) f += x + ",";
         return f;
       }()},
      {"data.tokenizer", c.data.tokenizer},
      {"data.reward", c.data.reward},
      {"data.reward_file", c.data.reward_file},
      {"data.reward_function", c.data.reward_function},
      {"data.require_eos", c.data.require_eos ? "true" : "false"},
      {"data.shuffle", c.data.shuffle ? "true" : "false"},
      {"data.enable_thinking", c.data.enable_thinking ? "true" : "false"},
      {"data.chat_template_kwargs", c.data.chat_template_kwargs},
      {"data.max_prompt_length", S(c.data.max_prompt_length)},
      {"data.allow_changed_dataset",
       c.data.allow_changed_dataset ? "true" : "false"},
      {"task.kinds", kinds},
      {"task.min_digits", S(c.task.min_digits)},
      {"task.max_digits", S(c.task.max_digits)},
      {"actor.ppo_epochs", S(c.actor.ppo_epochs)},
      {"actor.ppo_mini_batch_size", S(c.actor.ppo_mini_batch_size)},
      {"actor.clip_ratio", D(c.actor.clip_ratio)},
      {"actor.entropy_coeff", D(c.actor.entropy_coeff)},
      {"actor.tis_cap", D(c.actor.tis_cap)},
      {"critic.cliprange_value", D(c.critic.cliprange_value)},
      {"critic.value_loss_coeff", D(c.critic.value_loss_coeff)},
      {"rollout.tensor_model_parallel_size",
       S(c.rollout.tensor_model_parallel_size)},
      {"rollout.batch_size", S(c.rollout.batch_size)},
      {"rollout.n", S(c.rollout.n)},
      {"rollout.response_length", S(c.rollout.response_length)},
      {"rollout.temperature", D(c.rollout.temperature)},
      {"rollout.top_k", S(c.rollout.top_k)},
      {"rollout.top_p", D(c.rollout.top_p)},
      {"rollout.engine", c.rollout.engine},
      {"rollout.vllm.urls",
       [&] {
         std::string f;
         for (const auto& x : c.rollout.vllm.urls) f += x + ",";
         return f;
       }()},
      {"rollout.vllm.engines", S(c.rollout.vllm.engines)},
      {"rollout.vllm.tensor_parallel_size",
       S(c.rollout.vllm.tensor_parallel_size)},
      {"rollout.vllm.python", c.rollout.vllm.python},
      {"rollout.vllm.dtype", c.rollout.vllm.dtype},
      {"rollout.vllm.start_timeout_s", D(c.rollout.vllm.start_timeout_s)},
      {"rollout.vllm.request_timeout_s", D(c.rollout.vllm.request_timeout_s)},
      {"rollout.vllm.kv_cache_gib", S(c.rollout.vllm.kv_cache_gib)},
      {"rollout.vllm.max_restarts", S(c.rollout.vllm.max_restarts)},
      {"rollout.vllm.delta", c.rollout.vllm.delta},
      {"algorithm.adv_estimator",
       c.algorithm.adv_estimator == AdvEstimator::kGrpo ? "grpo" : "gae"},
      {"algorithm.gamma", D(c.algorithm.gamma)},
      {"algorithm.lam", D(c.algorithm.lam)},
      {"algorithm.norm_adv", c.algorithm.norm_adv ? "true" : "false"},
      {"algorithm.kl_penalty", c.algorithm.kl_penalty},
      {"algorithm.kl_ctrl_type", c.algorithm.kl_ctrl_type},
      {"algorithm.kl_coef", D(c.algorithm.kl_coef)},
      {"algorithm.kl_target", D(c.algorithm.kl_target)},
      {"algorithm.kl_horizon", D(c.algorithm.kl_horizon)},
      {"trainer.total_iterations", S(c.trainer.total_iterations)},
      {"trainer.seed", std::to_string(c.trainer.seed)},
      {"trainer.device", c.trainer.device},
      {"trainer.nproc", S(c.trainer.nproc)},
      {"trainer.sft_steps", S(c.trainer.sft_steps)},
      {"trainer.sft_batch_size", S(c.trainer.sft_batch_size)},
      {"trainer.sft_lr", D(c.trainer.sft_lr)},
      {"trainer.test_freq", S(c.trainer.test_freq)},
      {"trainer.gradient_checkpointing",
       c.trainer.gradient_checkpointing ? "true" : "false"},
      {"trainer.fsdp_per_layer", c.trainer.fsdp_per_layer ? "true" : "false"},
      {"trainer.offload_reference",
       c.trainer.offload_reference ? "true" : "false"},
      {"trainer.offload_rollout", c.trainer.offload_rollout ? "true" : "false"},
      {"trainer.offload_optimizer",
       c.trainer.offload_optimizer ? "true" : "false"},
      {"trainer.stop_grace_seconds", D(c.trainer.stop_grace_seconds)},
      {"checkpoint.store_root", c.checkpoint.store_root},
      {"checkpoint.save_every", S(c.checkpoint.save_every)},
      {"checkpoint.keep_last", S(c.checkpoint.keep_last)},
      {"checkpoint.commit_timeout_ms", S(c.checkpoint.commit_timeout_ms)},
      {"checkpoint.replicas", S(c.checkpoint.replicas)},
      {"checkpoint.heartbeat_timeout_ms", S(c.checkpoint.heartbeat_timeout_ms)},
      {"checkpoint.staging_mb", S(c.checkpoint.staging_mb)},
      {"checkpoint.read_in_place",
       c.checkpoint.read_in_place ? "true" : "false"},
      {"checkpoint.keep_superseded",
       c.checkpoint.keep_superseded ? "true" : "false"},
      {"checkpoint.on_failure", c.checkpoint.on_failure},
      {"checkpoint.max_consecutive_failures",
       S(c.checkpoint.max_consecutive_failures)},
      {"metrics.port", S(c.metrics.port)},
      {"metrics.bind", c.metrics.bind},
      {"metrics.pushgateway", c.metrics.pushgateway},
  };
  for (const auto& [name, o] :
       {std::pair{"actor", &c.actor.optim}, {"critic", &c.critic.optim}}) {
    const std::string p = std::string(name) + ".optim.";
    v.push_back({p + "lr", D(o->lr)});
    v.push_back({p + "beta1", D(o->beta1)});
    v.push_back({p + "beta2", D(o->beta2)});
    v.push_back({p + "eps", D(o->eps)});
    v.push_back({p + "weight_decay", D(o->weight_decay)});
    v.push_back({p + "grad_clip", D(o->grad_clip)});
  }
  return v;
}

void ExpectSame(const TrainConfig& want, const TrainConfig& got) {
  const auto a = FieldValues(want), b = FieldValues(got);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].second, b[i].second) << a[i].first;
  }
}

// A valid config in which every field differs from its default, with
// doubles that need all 17 digits.
TrainConfig Modified() {
  TrainConfig c;
  c.model.architecture = "LlamaForCausalLM";
  c.model.mlp_bias = true;
  c.model.vocab_size = 40;
  c.model.hidden_size = 96;
  c.model.intermediate_size = 200;
  c.model.num_layers = 3;
  c.model.num_heads = 8;
  c.model.num_kv_heads = 4;
  c.model.head_dim_override = 10;
  c.model.rope_theta = 1e6 + 0.5;
  c.model.rms_norm_eps = 1e-5 / 3;
  c.model.max_position_embeddings = 80;
  c.model.attention_bias = true;
  c.model.tie_word_embeddings = true;
  c.model.rope_scaling_type = "llama3";
  c.model.rope_scaling_factor = 0.1 + 0.7;
  c.model.rope_low_freq_factor = 1.5;
  c.model.rope_high_freq_factor = 4.25;
  c.model.rope_original_max_position_embeddings = 33;
  c.model.torch_dtype = "bfloat16";
  c.model.path = "models/a b";
  c.data.train_files = {"a.jsonl", "dir/b c.jsonl"};
  c.data.val_files = {"held out.jsonl"};
  c.data.tokenizer = "tok/";
  c.data.reward = "python";
  c.data.reward_file = "my rewards/r.py";
  c.data.reward_function = "score_all";
  c.data.require_eos = false;
  c.data.shuffle = false;
  c.data.enable_thinking = true;
  c.data.chat_template_kwargs = R"({"tools": [], "x": "a: b"})";
  c.data.max_prompt_length = 99;
  c.data.allow_changed_dataset = true;
  c.task.kinds = {TaskKind::kAdd, TaskKind::kAdd, TaskKind::kSort};
  c.task.min_digits = 2;
  c.task.max_digits = 9;
  c.actor.optim = {0.1 + 0.2, 0.85, 0.995, 1e-7, 0.01, -1.0};
  c.critic.optim = {1.0 / 3, 0.5, 0.95, 2e-8, 1e-300, 0.0};
  c.actor.ppo_epochs = 3;
  c.actor.ppo_mini_batch_size = 16;
  c.actor.clip_ratio = 0.28;
  c.actor.entropy_coeff = 1e-3;
  c.actor.tis_cap = 2.5;
  c.critic.cliprange_value = 0.2;
  c.critic.value_loss_coeff = 1.5;
  c.rollout.engine = "vllm";
  c.rollout.tensor_model_parallel_size = 4;
  c.rollout.batch_size = 32;
  c.rollout.n = 4;
  c.rollout.response_length = 12;
  c.rollout.temperature = 0.7;
  c.rollout.top_k = 5;
  c.rollout.top_p = 0.95;
  c.rollout.vllm = {{"http://127.0.0.1:8000", "http://10.0.0.2:8001"},
                    3, 2, "/opt/vllm/bin/python3", "float32", 90.5, 30,
                    4, 7, "on"};
  c.algorithm = {AdvEstimator::kGrpo, 0.99, 0.95, false, "low_var_kl",
                 "adaptive",          0.05, 0.2,  5e20};
  c.trainer = {std::numeric_limits<int64_t>::max(),
               std::numeric_limits<uint64_t>::max(),
               "cuda",
               8,
               0,
               7,
               1e-4,
               3,
               true,
               true,
               true,
               true,
               true,
               0.125};
  c.checkpoint = {"runs/a \"b\": c #d", 0, 5, 1234, 2, 777, 64, false, true,
                  "continue", 7};
  c.metrics = {0, "0.0.0.0", "localhost:9091"};
  return c;
}

TEST(ConfigTest, DefaultsValidateAndAnEmptyDocumentIsTheDefaults) {
  EXPECT_TRUE(ValidateConfig(TrainConfig{}).ok());
  for (const char* doc : {"", "# nothing\n", "model:\n", "{}"}) {
    Result<TrainConfig> c = ParseConfigYaml(doc);
    ASSERT_TRUE(c.ok()) << doc << ": " << c.status().ToString();
    ExpectSame(TrainConfig{}, *c);
  }
}

TEST(ConfigTest, ToYamlWritesEveryKeyInSectionsWithShortDoubles) {
  const std::string y = ToYaml(TrainConfig{});
  for (const char* part :
       {"model:\n  path: \"\"\n  architecture: LlamaForCausalLM\n"
        "  vocab_size: 32\n",
        "  rope_scaling:\n    rope_type: \"\"\n", "data:\n  train_files: []\n",
        "  rope_theta: 10000.0\n", "  rms_norm_eps: 1.0e-06\n",
        "task:\n  kinds: [reverse]\n",
        "actor:\n  optim:\n    lr: 0.002\n    beta1: 0.9\n",
        "    eps: 1.0e-08\n", "    weight_decay: 0.0\n", "  ppo_epochs: 2\n",
        "critic:\n  optim:\n    lr: 0.002\n",
        "algorithm:\n  adv_estimator: gae\n",
        "  kl_penalty: kl\n  kl_ctrl:\n    type: fixed\n    kl_coef: 0.01\n"
        "    target_kl: 0.1\n    horizon: 10000.0\n",
        "trainer:\n  total_iterations: 80\n  seed: 1\n  device: cpu\n",
        "checkpoint:\n  store_root: \"\"\n",
        "metrics:\n  port: -1\n  bind: \"127.0.0.1\"\n  pushgateway: \"\"\n"}) {
    EXPECT_NE(y.find(part), std::string::npos) << part << "\nin\n" << y;
  }
  EXPECT_EQ(y.find("#"), std::string::npos);
  // One line per key, plus the section headers.
  size_t lines = 0;
  for (char ch : y) lines += ch == '\n';
  EXPECT_EQ(lines, FieldValues(TrainConfig{}).size() + 10 + 5);
}

TEST(ConfigTest, RoundTripIsExact) {
  const TrainConfig modified = Modified();
  ASSERT_TRUE(ValidateConfig(modified).ok())
      << ValidateConfig(modified).ToString();
  // Llama is the default architecture and the only one with mlp_bias, so
  // a second config changes the architecture.
  TrainConfig qwen3 = Modified();
  qwen3.model.architecture = "Qwen3ForCausalLM";
  qwen3.model.mlp_bias = false;
  const auto def = FieldValues(TrainConfig{}), mod = FieldValues(modified),
             q3 = FieldValues(qwen3);
  for (size_t i = 0; i < def.size(); ++i) {
    EXPECT_TRUE(def[i].second != mod[i].second || def[i].second != q3[i].second)
        << def[i].first << " unchanged";
  }
  for (const TrainConfig& c : {TrainConfig{}, modified, qwen3}) {
    const std::string yaml = ToYaml(c);
    Result<TrainConfig> back = ParseConfigYaml(yaml);
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << yaml;
    ExpectSame(c, *back);
    EXPECT_EQ(ToYaml(*back), yaml);
  }
}

TEST(ConfigTest, StringsThatLookLikeOtherThingsRoundTrip) {
  for (const char* s :
       {"",        "true",      "No",          "y",
        "123",     "1.5",       "null",        "~",
        "a: b",    "#x",        "-x",          " lead",
        "trail ",  "tab\there", "line\nbreak", "q\"uo'te\\",
        "[a]",     "{a}",       "*ref",        "&anchor",
        "!tag",    "%p",        "@at",         "`b",
        "ünïcode", ".inf",      "/abs/path",   "rel/path-1.2_x"}) {
    TrainConfig c;
    c.checkpoint.store_root = s;
    Result<TrainConfig> back = ParseConfigYaml(ToYaml(c));
    ASSERT_TRUE(back.ok()) << s << ": " << back.status().ToString();
    EXPECT_EQ(back->checkpoint.store_root, s);
  }
}

}  // namespace
}  // namespace hy::trainer
