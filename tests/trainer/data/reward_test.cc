#include "hy/trainer/data/reward.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace hy::trainer {
namespace {

std::unique_ptr<RewardFunction> Make(std::string_view name,
                                     const RewardOptions& options = {}) {
  auto r = MakeReward(name, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(r).value() : nullptr;
}

double Score(const RewardFunction& f, std::string_view response,
             std::string_view answer, bool eos = true) {
  RewardInput input;
  input.response = response;
  input.ended_with_eos = eos;
  input.answer = answer;
  return f.Score(input);
}

TEST(RewardTest, ExactMatch) {
  auto f = Make("exact_match");
  EXPECT_EQ(f->name(), "exact_match");
  EXPECT_EQ(Score(*f, "82", "82"), 1.0);
  EXPECT_EQ(Score(*f, "81", "82"), 0.0);
  EXPECT_EQ(Score(*f, "I think 3, no: 82", "82"), 1.0);
  EXPECT_EQ(Score(*f, "82 or 83", "82"), 0.0);
  EXPECT_EQ(Score(*f, "steps...\n#### 1,234", "1234"), 1.0);
  EXPECT_EQ(Score(*f, "#### 72 (not 5)", "She sold 72.\n#### 72"), 1.0);
  EXPECT_EQ(Score(*f, "+7.0", "7"), 1.0);
  EXPECT_EQ(Score(*f, "-12", "-12"), 1.0);
  EXPECT_EQ(Score(*f, "12", "-12"), 0.0);
  EXPECT_EQ(Score(*f, "82", "82", /*eos=*/false), 1.0);
}

TEST(RewardTest, ExactMatchTakesTheBoxedAnswer) {
  auto f = Make("exact_match");
  EXPECT_EQ(Score(*f, "so \\boxed{1,234} (not 5)", "1234"), 1.0);
  EXPECT_EQ(Score(*f, "\\boxed{3} then \\boxed{\\frac{1}{2} x 8}", "8"), 1.0);
  EXPECT_EQ(Score(*f, "\\boxed{7", "7"), 1.0);  // Unclosed: the last number.
  EXPECT_EQ(Score(*f, "\\boxed{6} #### 7", "7"), 0.0);
}

TEST(RewardTest, StrictIsTheAnswerAndNothingElse) {
  RewardOptions options;
  options.require_eos = true;
  auto f = Make("strict", options);
  EXPECT_EQ(f->name(), "strict");
  EXPECT_EQ(Score(*f, "82", "82"), 1.0);
  EXPECT_EQ(Score(*f, " 82\n", "82"), 1.0);
  EXPECT_EQ(Score(*f, "1,234.", "1234"), 1.0);
  EXPECT_EQ(Score(*f, "The number 1+6 equals 7.", "7"), 0.0);
  EXPECT_EQ(Score(*f, "7 apples", "7"), 0.0);
  EXPECT_EQ(Score(*f, "82", "82", /*eos=*/false), 0.0);
  EXPECT_EQ(Score(*f, "Paris", " Paris"), 1.0);  // Not a number: the text.
  EXPECT_EQ(Score(*f, "paris", "Paris"), 0.0);
  EXPECT_EQ(Score(*f, "", ""), 0.0);
  auto exact = Make("exact_match");
  EXPECT_EQ(Score(*exact, "The number 1+6 equals 7.", "7"), 1.0);
}

TEST(RewardTest, ExactMatchRequiringEos) {
  RewardOptions options;
  options.require_eos = true;
  auto f = Make("exact_match", options);
  EXPECT_EQ(Score(*f, "82", "82", /*eos=*/true), 1.0);
  EXPECT_EQ(Score(*f, "82", "82", /*eos=*/false), 0.0);
}

TEST(RewardTest, UnparseableScoresZero) {
  auto f = Make("exact_match");
  const std::string huge(100000, '7');
  const char kBadUtf8[] = "\xff\xfe\xc3\x28\x00\x80";
  const std::string bad_utf8(kBadUtf8, sizeof(kBadUtf8) - 1);
  for (const std::string& response :
       {std::string(), std::string("garbage"), huge, bad_utf8,
        std::string("####"), std::string("#### x")}) {
    EXPECT_EQ(Score(*f, response, "82"), 0.0);
    EXPECT_EQ(Score(*f, response, ""), 0.0);
  }
  EXPECT_EQ(Score(*f, huge, huge), 1.0);
  EXPECT_EQ(Score(*f, "82", "no number here"), 0.0);
  EXPECT_EQ(Score(*f, "", ""), 0.0);
}

TEST(RewardTest, Format) {
  auto f = Make("format");
  EXPECT_EQ(f->name(), "format");
  EXPECT_EQ(Score(*f, "so #### 42", "7"), 1.0);  // Right format, wrong value.
  EXPECT_EQ(Score(*f, "42", "42"), 0.0);
  EXPECT_EQ(Score(*f, "#### forty-two", "42"), 0.0);
  EXPECT_EQ(Score(*f, "", "42"), 0.0);
}

TEST(RewardTest, WeightedExactMatchAndFormat) {
  RewardOptions options;
  options.exact_match_weight = 1.0;
  options.format_weight = 0.25;
  auto f = Make("exact_match+format", options);
  EXPECT_EQ(f->name(), "exact_match+format");
  EXPECT_DOUBLE_EQ(Score(*f, "#### 42", "42"), 1.25);
  EXPECT_DOUBLE_EQ(Score(*f, "#### 41", "42"), 0.25);
  EXPECT_DOUBLE_EQ(Score(*f, "42", "42"), 1.0);
  EXPECT_DOUBLE_EQ(Score(*f, "nothing", "42"), 0.0);

  options.format_weight = -1.0;
  EXPECT_TRUE(
      MakeReward("exact_match+format", options).status().IsInvalidArgument());
  options.format_weight = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(
      MakeReward("exact_match+format", options).status().IsInvalidArgument());
}

TEST(RewardTest, PartsSayWhatIsRightAndWhatIsInForm) {
  RewardInput in;
  in.response = "so #### 41";
  in.answer = "42";
  in.ended_with_eos = true;
  const RewardScore both = Make("exact_match+format")->Parts(in);
  EXPECT_DOUBLE_EQ(both.score, 0.1);
  EXPECT_EQ(both.correct, std::optional<bool>(false));
  EXPECT_EQ(both.formatted, std::optional<bool>(true));
  in.response = "42";
  const RewardScore strict = Make("strict")->Parts(in);
  EXPECT_EQ(strict.correct, std::optional<bool>(true));
  EXPECT_FALSE(strict.formatted.has_value());
  const RewardScore format = Make("format")->Parts(in);
  EXPECT_FALSE(format.correct.has_value());
  EXPECT_EQ(format.formatted, std::optional<bool>(false));
  auto batch = Make("exact_match")->ScoreBatch({in, in});
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->size(), 2u);
  EXPECT_EQ((*batch)[1].correct, std::optional<bool>(true));
}

TEST(RewardTest, UnknownNameListsKnownOnes) {
  auto r = MakeReward("accuracy", {});
  ASSERT_TRUE(r.status().IsInvalidArgument());
  const std::string_view m = r.status().message();
  EXPECT_NE(m.find("accuracy"), std::string_view::npos) << m;
  for (const std::string& name : KnownRewardNames()) {
    EXPECT_NE(m.find(name), std::string_view::npos) << m;
    // python needs a file (python_reward_test.cc); the rest need nothing.
    EXPECT_EQ(MakeReward(name, {}).ok(), name != "python") << name;
  }
}

}  // namespace
}  // namespace hy::trainer
