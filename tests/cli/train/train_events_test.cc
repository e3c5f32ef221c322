// hyctl train's TensorBoard events (cli/train/train_events.cc) without a run:
// every -o json figure becomes a scalar, and processes that resume or
// restart leave exactly one point per step as TensorBoard reads it
// (ReadRunEvents applies its rule; tests/cli/metrics/tensorboard_test.py checks
// the same against TensorBoard itself with real runs).

#include "train/train_events.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "hy/metrics/tensorboard/event_reader.h"
#include "testing/temp_dir.h"
#include "train/train_output.h"

namespace hy::cli {
namespace {

namespace tb = metrics::tensorboard;

trainer::IterationReport Report(int64_t iteration, double reward) {
  trainer::IterationReport r;
  r.iteration = iteration;
  r.reward_mean = reward;
  r.correct_rate = reward / 2;
  r.format_rate = reward;
  r.peak_rss_mb = {100, 120};
  r.phase_peak_rss_mb = {{"rollout", 110}, {"update", 120}};
  return r;
}

trainer::ValidationReport Val(int64_t iteration, double exact) {
  trainer::ValidationReport v;
  v.iteration = iteration;
  v.prompts = 10;
  v.exact_match = exact;
  return v;
}

// tag -> step -> value, requiring one point per step.
std::map<std::string, std::map<int64_t, float>> ByStep(
    const tb::RunEvents& run) {
  std::map<std::string, std::map<int64_t, float>> out;
  for (const auto& [tag, points] : run.scalars) {
    for (const tb::ScalarPoint& p : points) {
      EXPECT_TRUE(out[tag].emplace(p.step, p.value).second)
          << tag << " has two points at step " << p.step;
    }
  }
  return out;
}

class TrainEventsEngineTest : public ::testing::TestWithParam<std::string> {};

// For hy's own rollout and for vLLM's (which adds the weight sync's keys).
TEST_P(TrainEventsEngineTest, EveryJsonFigureIsAScalar) {
  trainer::IterationReport r = Report(4, 0.5);
  r.rollout_engine = GetParam();
  const nlohmann::json j = nlohmann::json::parse(IterationJson(r));
  EXPECT_EQ(j.contains("weight_version"), GetParam() == "vllm");
  std::set<std::string> tags;
  for (const auto& v : IterationScalars(r)) tags.insert(v.tag);
  // Each JSON key but the step and the state (text) has its tag.
  const std::map<std::string, std::string> renamed = {
      {"tokens_per_second", "throughput/tokens_per_second"},
      {"reshard_bytes", "reshard/bytes"},
      {"reshard_logical_bytes", "reshard/logical_bytes"},
      {"world_size", "run/world_size"},
      {"checkpoint_step", "checkpoint/step"},
      {"checkpoint_ms", "checkpoint/blocking_ms"},
      {"checkpoint_durable_ms", "checkpoint/durable_ms"},
      {"checkpoint_failures", "checkpoint/failures"},
      {"peak_rss_mb", "memory/peak_rss_mb"},
      {"phase_peak_rss_mb", "memory/phase_peak_rss_mb/rollout"},
      {"weight_sync_bytes", "rollout/weight_sync_bytes"},
      {"weight_version", "rollout/weight_version"},
      {"engine_restarts", "rollout/engine_restarts"},
      {"rollout_retries", "rollout/retries"},
      {"logprob_abs_diff_mean", "rollout/logprob_abs_diff_mean"},
      {"logprob_abs_diff_max", "rollout/logprob_abs_diff_max"},
  };
  for (const auto& [key, value] : j.items()) {
    if (key == "iteration" || key == "checkpoint_state" ||
        key == "rollout_engine" || key == "checkpoint_failure_cause") {
      continue;  // Text.
    }
    std::string tag;
    if (renamed.count(key) != 0) {
      tag = renamed.at(key);
    } else if (key.size() > 3 && key.compare(key.size() - 3, 3, "_ms") == 0) {
      tag = "time/" + key;
    } else {
      tag = "ppo/" + key;
    }
    EXPECT_EQ(tags.count(tag), 1u) << key << " -> " << tag;
  }
  EXPECT_EQ(tags.count("memory/peak_rss_mb/rank_1"), 1u);
  EXPECT_EQ(tags.count("memory/phase_peak_rss_mb/update"), 1u);
}

INSTANTIATE_TEST_SUITE_P(Engines, TrainEventsEngineTest,
                         ::testing::Values("hy", "vllm"));

TEST(TrainEventsTest, RestartsAndResumesLeaveOnePointPerStep) {
  TempDir root;
  {
    // A run validating every 2 iterations, killed after iteration 5
    // (step 4 committed).
    TrainEvents e(root.path(), "a: 1", nullptr);
    e.OnValidation(Val(0, 0.1));
    for (int64_t it = 0; it < 5; ++it) {
      e.OnIteration(Report(it, 1.0 * (it + 1)));
      if ((it + 1) % 2 == 0) e.OnValidation(Val(it + 1, 0.2));
    }
    ASSERT_TRUE(e.status().ok()) << e.status();
  }
  {
    // Restarted from step 4: validates at 4 again (already there), redoes
    // step 5 and goes on to 6.
    TrainEvents e(root.path(), "a: 2", nullptr);
    e.OnValidation(Val(4, 0.9));
    e.OnIteration(Report(4, 50));
    e.OnIteration(Report(5, 60));
    e.OnValidation(Val(6, 0.3));
    ASSERT_TRUE(e.status().ok()) << e.status();
  }
  {
    // Resumed from step 5 (a roll-back): redoes step 6 without the
    // validation at 6 that the first end wrote.
    TrainEvents e(root.path(), "a: 3", nullptr);
    e.OnValidation(Val(5, 0.4));
    e.OnIteration(Report(5, 600));
    ASSERT_TRUE(e.status().ok()) << e.status();
  }
  auto run = tb::ReadRunEvents(TensorBoardDir(root.path()));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->files.size(), 3u);
  EXPECT_EQ(run->session_starts, 3);
  const auto by_step = ByStep(*run);
  const std::map<int64_t, float> reward = {{1, 1}, {2, 2},  {3, 3},
                                           {4, 4}, {5, 50}, {6, 600}};
  EXPECT_EQ(by_step.at("ppo/reward_mean"), reward);
  // 0, 2, 4 from the first process (4 not written again), 5 from the last;
  // the 6 of the second was dropped by the last one's START at 6.
  const std::map<int64_t, float> val = {
      {0, 0.1f}, {2, 0.2f}, {4, 0.2f}, {5, 0.4f}};
  EXPECT_EQ(by_step.at("val/exact_match"), val);
  // The config of each process at its first step.
  ASSERT_EQ(run->texts.at("config").size(), 3u);
  EXPECT_EQ(run->texts.at("config")[0].step, 1);
  EXPECT_EQ(run->texts.at("config")[1].step, 5);
  EXPECT_EQ(run->texts.at("config")[2].step, 6);
  EXPECT_EQ(run->texts.at("config")[2].text, "    a: 3\n");
}

TEST(TrainEventsTest, AWriteErrorKeepsTheEventsUntilTheyCanBeWritten) {
  TempDir root;
  // The events directory's place is taken by a file.
  root.WriteFile("tensorboard", "not a directory");
  std::vector<std::string> warnings;
  TrainEvents e(root.path(), "a: 1",
                [&](const std::string& w) { warnings.push_back(w); },
                /*retry_seconds=*/0);
  e.OnIteration(Report(0, 1));
  e.OnIteration(Report(1, 2));
  EXPECT_FALSE(e.status().ok());
  EXPECT_EQ(e.pending(), 2u);
  ASSERT_EQ(warnings.size(), 1u);  // Said once.
  EXPECT_NE(warnings[0].find("training goes on"), std::string::npos)
      << warnings[0];
  // Writing works again: the kept steps are written, then the new one.
  std::filesystem::remove(root.path() + "/tensorboard");
  e.OnIteration(Report(2, 3));
  EXPECT_TRUE(e.status().ok()) << e.status();
  EXPECT_EQ(e.pending(), 0u);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[1].find("written again (3 report(s) written late"),
            std::string::npos)
      << warnings[1];
  auto run = metrics::tensorboard::ReadRunEvents(TensorBoardDir(root.path()));
  ASSERT_TRUE(run.ok()) << run.status();
  std::vector<int64_t> steps;
  for (const auto& p : run->scalars.at("ppo/reward_mean")) steps.push_back(p.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3}));
}

}  // namespace
}  // namespace hy::cli
