// The python reward (reward.h): functions written in Python in verl's two
// forms, run by a real worker process (python -m hy_reward.serve in the
// project's .venv): scores in order, batches called once, the sample that
// made the function raise named with its message, bad scores refused,
// prints kept out of the protocol, files and functions that cannot load
// refused with the worker's word.

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "hy/trainer/data/reward.h"
#include "testing/temp_dir.h"

namespace hy::trainer {
namespace {

class PythonRewardTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& code) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << code;
    return path;
  }

  Result<std::unique_ptr<RewardFunction>> Make(const std::string& file,
                                               const std::string& function) {
    RewardOptions o;
    o.python_file = file;
    o.python_function = function;
    return MakeReward("python", o);
  }

  std::vector<RewardInput> Inputs(const std::vector<std::string>& responses,
                                  const std::string& answer) {
    std::vector<RewardInput> in;
    for (size_t i = 0; i < responses.size(); ++i) {
      RewardInput r;
      r.response = responses[i];
      r.answer = answer;
      r.ended_with_eos = i % 2 == 0;
      r.fields = &fields_;
      r.prompt = "1+6=";
      r.index = static_cast<int64_t>(i);
      r.source = sources_[i % sources_.size()];
      in.push_back(r);
    }
    return in;
  }

  static std::vector<double> Scores(
      const Result<std::vector<RewardScore>>& r) {
    std::vector<double> out;
    if (r.ok()) {
      for (const RewardScore& s : *r) out.push_back(s.score);
    }
    return out;
  }

  TempDir dir_;
  std::map<std::string, std::string> fields_ = {
      {"answer", "7"}, {"data_source", "arith"}, {"level", "2"}};
  std::vector<std::string> sources_ = {"p.jsonl:1", "p.jsonl:2",
                                       "p.jsonl:3"};
};

TEST_F(PythonRewardTest, PerSampleFunctionGetsVerlsArguments) {
  const std::string file = Write("r.py", R"(
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    print("scoring", solution_str)  # Must not reach the protocol.
    ok = (data_source == "arith" and extra_info["level"] == "2"
          and extra_info["prompt"] == "1+6=" and "answer" not in extra_info)
    if not ok:
        return 0.5
    score = float(solution_str.strip() == ground_truth)
    return {"score": score + (0.25 if extra_info["ended_with_eos"] else 0)}
)");
  auto r = Make(file, "compute_score");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->name(), "python");
  const std::vector<std::string> responses = {"7", " 7", "8"};
  auto scores = (*r)->ScoreBatch(Inputs(responses, "7"));
  ASSERT_TRUE(scores.ok()) << scores.status();
  EXPECT_EQ(Scores(scores), (std::vector<double>{1.25, 1.0, 0.25}));
  // verl's "acc" in a dict answer is the correct part; none without it.
  EXPECT_FALSE((*scores)[0].correct.has_value());
  EXPECT_EQ((*r)->Score(Inputs({"7"}, "7")[0]), 1.25);
  auto empty = (*r)->ScoreBatch({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST_F(PythonRewardTest, BatchedFunctionIsCalledOncePerBatch) {
  const std::string file = Write("b.py", R"(
calls = []
def score_all(data_sources, solution_strs, ground_truths, extra_infos):
    calls.append(len(solution_strs))
    return [len(calls) * 10 + float(s == g)
            for s, g in zip(solution_strs, ground_truths)]
)");
  auto r = Make(file, "score_all");
  ASSERT_TRUE(r.ok()) << r.status();
  auto first = (*r)->ScoreBatch(Inputs({"7", "1", "7", "7"}, "7"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Scores(first), (std::vector<double>{11, 10, 11, 11}));  // 1 call.
  auto second = (*r)->ScoreBatch(Inputs({"2"}, "7"));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(Scores(second), std::vector<double>{20});  // State was kept.
}

TEST_F(PythonRewardTest, VerlsAccIsTheCorrectPart) {
  const std::string file = Write("a.py", R"(
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    right = solution_str == ground_truth
    return {"score": 0.9 if right else 0.1, "acc": right}
)");
  auto r = Make(file, "compute_score");
  ASSERT_TRUE(r.ok()) << r.status();
  auto s = (*r)->ScoreBatch(Inputs({"7", "8"}, "7"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Scores(s), (std::vector<double>{0.9, 0.1}));
  EXPECT_EQ((*s)[0].correct, std::optional<bool>(true));
  EXPECT_EQ((*s)[1].correct, std::optional<bool>(false));
  EXPECT_FALSE((*s)[0].formatted.has_value());
}

TEST_F(PythonRewardTest, AnExceptionNamesTheSampleNeverAZero) {
  const std::string per = Write("e.py", R"(
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if solution_str == "boom":
        raise RuntimeError("cannot parse " + solution_str)
    return 1.0
)");
  auto r = Make(per, "compute_score");
  ASSERT_TRUE(r.ok()) << r.status();
  auto bad = (*r)->ScoreBatch(Inputs({"7", "boom", "7"}, "7"));
  ASSERT_TRUE(bad.status().IsInvalidArgument()) << bad.status();
  const std::string m(bad.status().message());
  EXPECT_EQ(m.rfind("p.jsonl:2 (response \"boom\"): reward compute_score", 0),
            0u)
      << m;
  EXPECT_NE(m.find("RuntimeError: cannot parse boom"), std::string::npos) << m;
  EXPECT_NE(m.find("e.py:4"), std::string::npos) << m;  // Where it raised.
  EXPECT_TRUE(std::isnan((*r)->Score(Inputs({"boom"}, "7")[0])));
  // The worker goes on after a failed batch.
  auto next = (*r)->ScoreBatch(Inputs({"7"}, "7"));
  ASSERT_TRUE(next.ok()) << next.status();

  // A batched function that raises: the sample found one at a time.
  const std::string batched = Write("eb.py", R"(
def score_all(data_sources, solution_strs, ground_truths, extra_infos):
    return [1.0 / (len(s) - 3) for s in solution_strs]
)");
  auto b = Make(batched, "score_all");
  ASSERT_TRUE(b.ok()) << b.status();
  auto zero_div = (*b)->ScoreBatch(Inputs({"x", "y", "abc"}, "7"));
  ASSERT_TRUE(zero_div.status().IsInvalidArgument()) << zero_div.status();
  EXPECT_EQ(zero_div.status().message().rfind("p.jsonl:3", 0), 0u)
      << zero_div.status();
  EXPECT_NE(zero_div.status().message().find("ZeroDivisionError"),
            std::string::npos);
}

TEST_F(PythonRewardTest, ScoresThatAreNoFiniteNumbersAreRefused) {
  const std::string file = Write("n.py", R"(
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return {"nan": float("nan"), "none": None, "dict": {"acc": 1}}.get(
        solution_str, 1)
)");
  auto r = Make(file, "compute_score");
  ASSERT_TRUE(r.ok()) << r.status();
  for (const char* bad : {"nan", "none", "dict"}) {
    auto s = (*r)->ScoreBatch(Inputs({"ok", bad}, "7"));
    ASSERT_TRUE(s.status().IsInvalidArgument()) << bad;
    EXPECT_EQ(s.status().message().rfind("p.jsonl:2", 0), 0u) << s.status();
  }
}

TEST_F(PythonRewardTest, FilesAndFunctionsThatCannotLoadAreRefused) {
  auto no_file = Make("", "compute_score");
  ASSERT_TRUE(no_file.status().IsInvalidArgument());
  EXPECT_NE(no_file.status().message().find("data.reward_file"),
            std::string::npos);
  auto missing = Make(dir_.path() + "/absent.py", "compute_score");
  ASSERT_TRUE(missing.status().IsInvalidArgument()) << missing.status();
  EXPECT_NE(missing.status().message().find("absent.py"), std::string::npos);
  const std::string file = Write("s.py", "def other(): pass\n");
  auto no_function = Make(file, "compute_score");
  ASSERT_TRUE(no_function.status().IsInvalidArgument());
  EXPECT_NE(no_function.status().message().find("no function "
                                                "'compute_score'"),
            std::string::npos)
      << no_function.status();
  const std::string broken = Write("x.py", "def compute_score(:\n");
  auto syntax = Make(broken, "compute_score");
  ASSERT_TRUE(syntax.status().IsInvalidArgument());
  EXPECT_NE(syntax.status().message().find("SyntaxError"), std::string::npos)
      << syntax.status();
}

}  // namespace
}  // namespace hy::trainer
