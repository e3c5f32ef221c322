// TrainConfig's YAML: parsing, printing (exact round trips), overrides and
// validation.

#include "hy/trainer/config.h"

#include <gtest/gtest.h>

#include <cmath>
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
      {"data.require_eos", c.data.require_eos ? "true" : "false"},
      {"data.shuffle", c.data.shuffle ? "true" : "false"},
      {"data.enable_thinking", c.data.enable_thinking ? "true" : "false"},
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
      {"critic.cliprange_value", D(c.critic.cliprange_value)},
      {"critic.value_loss_coeff", D(c.critic.value_loss_coeff)},
      {"rollout.tensor_model_parallel_size",
       S(c.rollout.tensor_model_parallel_size)},
      {"rollout.batch_size", S(c.rollout.batch_size)},
      {"rollout.n", S(c.rollout.n)},
      {"rollout.response_length", S(c.rollout.response_length)},
      {"rollout.temperature", D(c.rollout.temperature)},
      {"rollout.top_k", S(c.rollout.top_k)},
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
      {"checkpoint.store_root", c.checkpoint.store_root},
      {"checkpoint.save_every", S(c.checkpoint.save_every)},
      {"checkpoint.keep_last", S(c.checkpoint.keep_last)},
      {"checkpoint.commit_timeout_ms", S(c.checkpoint.commit_timeout_ms)},
      {"checkpoint.replicas", S(c.checkpoint.replicas)},
      {"checkpoint.heartbeat_timeout_ms", S(c.checkpoint.heartbeat_timeout_ms)},
      {"checkpoint.staging_mb", S(c.checkpoint.staging_mb)},
      {"checkpoint.read_in_place",
       c.checkpoint.read_in_place ? "true" : "false"},
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
  c.data.reward = "exact_match+format";
  c.data.require_eos = false;
  c.data.shuffle = false;
  c.data.enable_thinking = true;
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
  c.critic.cliprange_value = 0.2;
  c.critic.value_loss_coeff = 1.5;
  c.rollout = {4, 32, 4, 12, 0.7, 5};
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
               true};
  c.checkpoint = {"runs/a \"b\": c #d", 0, 5, 1234, 2, 777, 64, false};
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
  EXPECT_EQ(lines, FieldValues(TrainConfig{}).size() + 10 + 4);
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

void ExpectError(const Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.ToString().find(needle), std::string::npos)
      << "'" << needle << "' not in: " << s.ToString();
}

TEST(ConfigTest, UnknownKeysAreNamedWithTheirPath) {
  ExpectError(ParseConfigYaml("actor:\n  optim:\n    lrr: 1\n").status(),
              "unknown key actor.optim.lrr (line 3)");
  ExpectError(ParseConfigYaml("modle:\n  vocab_size: 32\n").status(),
              "unknown key modle");
  ExpectError(ParseConfigYaml("algorithm: {kl_ctrl: {coef: 1}}").status(),
              "algorithm.kl_ctrl.coef");
  ExpectError(ParseConfigYaml("algorithm: {kl_coef: 1}").status(),
              "algorithm.kl_coef");
  ExpectError(ParseConfigYaml("task: {kinds: [add], max: 3}").status(),
              "task.max");
}

TEST(ConfigTest, WrongTypesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"actor: {ppo_epochs: 2.5}", "actor.ppo_epochs: expected an integer"},
      {"actor: {ppo_epochs: 99999999999}", "actor.ppo_epochs"},
      {"rollout:\n  temperature: hot\n",
       "rollout.temperature: expected a number, got \"hot\" (line 2)"},
      {"actor: 3", "actor: expected a map of keys"},
      {"actor: {optim: [1, 2]}", "actor.optim: expected a map"},
      {"trainer: {seed: -1}", "trainer.seed: expected a non-negative integer"},
      {"trainer: {device: [cpu]}", "trainer.device: expected a string"},
      {"algorithm: {norm_adv: maybe}", "algorithm.norm_adv: expected true"},
      {"algorithm: {adv_estimator: ppo}", "algorithm.adv_estimator"},
      {"task: {kinds: [reverse, mul]}", "task.kinds: expected reverse, sort"},
      {"task: {kinds: {a: 1}}", "task.kinds: expected a list"},
      {"metrics: {port: }", "metrics.port: expected an integer, got nothing"},
      {"- a\n- b\n", "config: expected a map"},
      {"actor: {optim: {lr: [0.1}", "config YAML"},
  };
  for (const auto& [doc, needle] : cases) {
    SCOPED_TRACE(doc);
    ExpectError(ParseConfigYaml(doc).status(), needle);
  }
  // Accepted spellings (YAML 1.1 and 1.2 booleans, signs, .inf / .nan,
  // a number for a string, one kind for a list of kinds).
  Result<TrainConfig> c = ParseConfigYaml(
      "actor: {optim: {lr: 3e-4}, clip_ratio: +0.3}\n"
      "algorithm: {norm_adv: False}\ntrainer: {sft_lr: 1}\n"
      "checkpoint: {store_root: 17}\ntask: {kinds: add}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->actor.optim.lr, 3e-4);
  EXPECT_EQ(c->actor.clip_ratio, 0.3);
  EXPECT_FALSE(c->algorithm.norm_adv);
  EXPECT_EQ(c->trainer.sft_lr, 1.0);
  EXPECT_EQ(c->checkpoint.store_root, "17");
  EXPECT_EQ(c->task.kinds, std::vector<TaskKind>{TaskKind::kAdd});
  TrainConfig m;
  ASSERT_TRUE(MergeConfigYaml("actor: {optim: {grad_clip: -.Inf, lr: .nan}}\n"
                              "algorithm: {norm_adv: no}\n",
                              &m)
                  .ok());
  EXPECT_EQ(m.actor.optim.grad_clip, -HUGE_VAL);
  EXPECT_TRUE(std::isnan(m.actor.optim.lr));
  EXPECT_FALSE(m.algorithm.norm_adv);
}

TEST(ConfigTest, AlgorithmShorthand) {
  Result<TrainConfig> c = ParseConfigYaml("algorithm: grpo\nrollout: {n: 4}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->algorithm.adv_estimator, AdvEstimator::kGrpo);
  EXPECT_EQ(c->algorithm.gamma, 1.0);  // The rest keeps its defaults.
  c = ParseConfigYaml("algorithm: gae\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->algorithm.adv_estimator, AdvEstimator::kGae);
  ExpectError(ParseConfigYaml("algorithm: grpo\n").status(), "rollout.n");
  ExpectError(ParseConfigYaml("algorithm: ppo\n").status(),
              "algorithm.adv_estimator: expected gae or grpo");
}

TEST(ConfigTest, Overrides) {
  TrainConfig c;
  for (const char* o :
       {"actor.optim.lr=3e-4", "algorithm=grpo", "rollout.n=8",
        "task.kinds=[add, sort]", "checkpoint.store_root=/tmp/x y",
        "algorithm.kl_ctrl.type=adaptive", "trainer.seed=18446744073709551615",
        "critic={cliprange_value: 0.25}", "metrics.pushgateway=h:1"}) {
    ASSERT_TRUE(ApplyOverride(&c, o).ok()) << o;
  }
  EXPECT_EQ(c.actor.optim.lr, 3e-4);
  EXPECT_EQ(c.algorithm.adv_estimator, AdvEstimator::kGrpo);
  EXPECT_EQ(c.rollout.n, 8);
  EXPECT_EQ(c.task.kinds,
            (std::vector<TaskKind>{TaskKind::kAdd, TaskKind::kSort}));
  EXPECT_EQ(c.checkpoint.store_root, "/tmp/x y");
  EXPECT_EQ(c.algorithm.kl_ctrl_type, "adaptive");
  EXPECT_EQ(c.trainer.seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(c.critic.cliprange_value, 0.25);
  EXPECT_EQ(c.metrics.pushgateway, "h:1");
  EXPECT_TRUE(ValidateConfig(c).ok()) << ValidateConfig(c).ToString();
  ASSERT_TRUE(ApplyOverride(&c, "checkpoint.store_root=").ok());
  EXPECT_EQ(c.checkpoint.store_root, "");

  ExpectError(ApplyOverride(&c, "actor.optim.lrr=1"),
              "unknown key actor.optim.lrr");
  ExpectError(ApplyOverride(&c, "actor.optim.lr"), "section.key=value");
  ExpectError(ApplyOverride(&c, "=3"), "section.key=value");
  ExpectError(ApplyOverride(&c, "actor=1"), "actor: expected a map");
  ExpectError(ApplyOverride(&c, "actor.ppo_epochs=x"),
              "actor.ppo_epochs: expected an integer, got \"x\"");
  ExpectError(ApplyOverride(&c, "actor.ppo_epochs="), "actor.ppo_epochs");
  ExpectError(ApplyOverride(&c, "rollout.n=[1"), "rollout.n: cannot read");
  // Overrides do not validate; ValidateConfig does.
  ASSERT_TRUE(ApplyOverride(&c, "rollout.temperature=0").ok());
  ExpectError(ValidateConfig(c), "rollout.temperature");
}

TEST(ConfigTest, MergeKeepsOtherValuesAndDoesNotValidate) {
  TrainConfig c;
  c.rollout.n = 4;
  ASSERT_TRUE(MergeConfigYaml("rollout: {batch_size: 0}\n", &c).ok());
  EXPECT_EQ(c.rollout.n, 4);
  EXPECT_EQ(c.rollout.batch_size, 0);
  ExpectError(ParseConfigYaml("rollout: {batch_size: 0}\n").status(),
              "rollout.batch_size must be >= 1, got 0");
}

TEST(ConfigTest, EachValidationFailureNamesItsField) {
  const std::vector<std::pair<std::vector<const char*>, const char*>> cases = {
      {{"model.hidden_size=0"}, "model.hidden_size"},
      {{"model.num_kv_heads=3"}, "model.num_heads"},
      {{"task.kinds=[]"}, "task.kinds"},
      {{"task.min_digits=0"}, "task.min_digits"},
      {{"task.max_digits=33"}, "task.max_digits"},
      {{"task.min_digits=5", "task.max_digits=3"}, "task.max_digits"},
      {{"actor.optim.lr=0"}, "actor.optim.lr must be positive"},
      {{"actor.optim.lr=.inf"}, "actor.optim.lr"},
      {{"critic.optim.beta1=-0.1"}, "critic.optim.beta1"},
      {{"critic.optim.beta2=1"}, "critic.optim.beta2 must be in [0, 1)"},
      {{"actor.optim.eps=0"}, "actor.optim.eps"},
      {{"critic.optim.weight_decay=-1"}, "critic.optim.weight_decay"},
      {{"actor.optim.grad_clip=.nan"}, "actor.optim.grad_clip"},
      {{"actor.ppo_epochs=0"}, "actor.ppo_epochs"},
      {{"actor.ppo_mini_batch_size=0"}, "actor.ppo_mini_batch_size"},
      {{"actor.ppo_mini_batch_size=65"},
       "actor.ppo_mini_batch_size must be <= rollout.batch_size * "
       "rollout.n (64)"},
      {{"actor.clip_ratio=0"}, "actor.clip_ratio"},
      {{"actor.entropy_coeff=-0.5"}, "actor.entropy_coeff"},
      {{"critic.cliprange_value=0"}, "critic.cliprange_value"},
      {{"critic.value_loss_coeff=-1"}, "critic.value_loss_coeff"},
      {{"rollout.tensor_model_parallel_size=0"},
       "rollout.tensor_model_parallel_size"},
      {{"rollout.batch_size=0"}, "rollout.batch_size"},
      {{"rollout.n=0"}, "rollout.n"},
      {{"rollout.response_length=0"}, "rollout.response_length"},
      {{"rollout.response_length=60"}, "model.max_position_embeddings"},
      {{"rollout.temperature=0"}, "rollout.temperature"},
      {{"rollout.top_k=-1"}, "rollout.top_k"},
      {{"algorithm.gamma=1.5"}, "algorithm.gamma must be in [0, 1]"},
      {{"algorithm.lam=-0.1"}, "algorithm.lam"},
      {{"algorithm=grpo"}, "rollout.n must be >= 2"},
      {{"algorithm.kl_penalty=k4"}, "algorithm.kl_penalty"},
      {{"algorithm.kl_ctrl.type=pid"}, "algorithm.kl_ctrl.type"},
      {{"algorithm.kl_ctrl.kl_coef=-1"}, "algorithm.kl_ctrl.kl_coef"},
      {{"algorithm.kl_ctrl.target_kl=0"}, "algorithm.kl_ctrl.target_kl"},
      {{"algorithm.kl_ctrl.horizon=0"}, "algorithm.kl_ctrl.horizon"},
      {{"trainer.total_iterations=0"}, "trainer.total_iterations"},
      {{"trainer.device=tpu"}, "trainer.device must be cpu or cuda"},
      {{"trainer.nproc=0"}, "trainer.nproc"},
      {{"trainer.sft_steps=-1"}, "trainer.sft_steps"},
      {{"trainer.sft_batch_size=0"}, "trainer.sft_batch_size"},
      {{"trainer.sft_lr=0"}, "trainer.sft_lr"},
      {{"trainer.test_freq=-1"}, "trainer.test_freq"},
      {{"data.val_files=[v.jsonl]"}, "data.val_files needs data.train_files"},
      {{"checkpoint.save_every=-1"}, "checkpoint.save_every"},
      {{"checkpoint.keep_last=0"}, "checkpoint.keep_last"},
      {{"checkpoint.commit_timeout_ms=0"}, "checkpoint.commit_timeout_ms"},
      {{"checkpoint.replicas=-1"}, "checkpoint.replicas"},
      {{"checkpoint.staging_mb=-1"}, "checkpoint.staging_mb"},
      {{"checkpoint.heartbeat_timeout_ms=0"},
       "checkpoint.heartbeat_timeout_ms"},
      {{"metrics.port=-2"}, "metrics.port"},
      {{"metrics.port=65536"}, "metrics.port"},
      {{"metrics.pushgateway=localhost"}, "metrics.pushgateway"},
      {{"metrics.pushgateway=h:0"}, "metrics.pushgateway"},
      {{"metrics.pushgateway=:9091"}, "metrics.pushgateway"},
  };
  for (const auto& [overrides, field] : cases) {
    TrainConfig c;
    for (const char* o : overrides) {
      ASSERT_TRUE(ApplyOverride(&c, o).ok()) << o;
    }
    SCOPED_TRACE(overrides.front());
    ExpectError(ValidateConfig(c), field);
  }
  // Edges that are fine.
  for (const char* o :
       {"checkpoint.save_every=0", "rollout.top_k=0", "algorithm.gamma=0",
        "algorithm.lam=1", "metrics.port=0", "metrics.port=65535",
        "actor.optim.grad_clip=0", "trainer.sft_steps=0",
        "actor.ppo_mini_batch_size=64"}) {
    TrainConfig c;
    ASSERT_TRUE(ApplyOverride(&c, o).ok()) << o;
    EXPECT_TRUE(ValidateConfig(c).ok())
        << o << ": " << ValidateConfig(c).ToString();
  }
}

}  // namespace
}  // namespace hy::trainer
