// TrainConfig from user input: unknown keys and wrong types named with
// their path, the algorithm shorthand, --set overrides, merging, and each
// validation failure naming its field. Printing and round trips:
// config_test.cc.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "hy/trainer/config/config.h"

namespace hy::trainer {
namespace {

void ExpectError(const Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.ToString().find(needle), std::string::npos)
      << "'" << needle << "' not in: " << s.ToString();
}

TEST(ConfigTest, UnknownKeysAreNamedWithTheirPath) {
  ExpectError(ParseConfigYaml("actor:\n  optim:\n    lrr: 1\n").status(),
              "unknown key actor.optim.lrr (line 3); did you mean "
              "actor.optim.lr?");
  // The nearest key, by spelling or by the same name in another section.
  ExpectError(ParseConfigYaml("checkpoint: {save_evry: 2}").status(),
              "did you mean checkpoint.save_every?");
  ExpectError(ParseConfigYaml("trainer: {replicas: 2}").status(),
              "did you mean checkpoint.replicas?");
  EXPECT_EQ(ParseConfigYaml("zzz: {qqqqqqq: 1}")
                .status()
                .ToString()
                .find("did you mean"),
            std::string::npos);
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
      {{"data.reward=python"},
       "data.reward_file must name a .py file when data.reward is python"},
      {{"data.reward_file=r.py"},
       "data.reward_file is read only when data.reward is python"},
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
      {{"checkpoint.on_failure=ignore"},
       "checkpoint.on_failure must be stop or continue"},
      {{"checkpoint.max_consecutive_failures=0"},
       "checkpoint.max_consecutive_failures"},
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
