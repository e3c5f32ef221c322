#include "hy/trainer/data/arith_data.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "hy/trainer/data/answer.h"
#include "hy/trainer/data/prompt_data.h"
#include "hy/trainer/data/reward.h"
#include "testing/temp_dir.h"

namespace hy::trainer {
namespace {

// Recomputes "A<op>B=" independently of the generator.
int64_t Evaluate(const std::string& question) {
  std::istringstream in(question);
  int64_t a = 0, b = 0;
  char op = 0, eq = 0;
  in >> a >> op >> b >> eq;
  EXPECT_EQ(eq, '=') << question;
  return op == '+' ? a + b : op == '-' ? a - b : a * b;
}

TEST(ArithDataTest, DeterministicAndCorrect) {
  ArithConfig config;
  config.ops = "+-*";
  config.min_digits = 1;
  config.max_digits = 3;
  config.seed = 11;
  std::set<char> ops_seen;
  std::set<std::string> questions;
  for (uint64_t i = 0; i < 500; ++i) {
    const ArithProblem p = MakeArithProblem(config, i);
    const ArithProblem again = MakeArithProblem(config, i);
    EXPECT_EQ(p.question, again.question);
    EXPECT_EQ(p.answer, again.answer);
    EXPECT_EQ(std::to_string(Evaluate(p.question)), p.answer) << p.question;
    ops_seen.insert(p.question[p.question.find_first_of("+-*", 1)]);
    questions.insert(p.question);
  }
  EXPECT_EQ(ops_seen, (std::set<char>{'+', '-', '*'}));
  EXPECT_GT(questions.size(), 400u);
  ArithConfig other = config;
  other.seed = 12;
  int same = 0;
  for (uint64_t i = 0; i < 20; ++i) {
    same += MakeArithProblem(config, i).question ==
            MakeArithProblem(other, i).question;
  }
  EXPECT_LT(same, 5);
}

TEST(ArithDataTest, DigitRangeIsRespected) {
  ArithConfig config;
  config.ops = "*";
  config.min_digits = 9;
  config.max_digits = 9;
  for (uint64_t i = 0; i < 100; ++i) {
    const ArithProblem p = MakeArithProblem(config, i);
    const size_t star = p.question.find('*');
    EXPECT_EQ(star, 9u) << p.question;
    EXPECT_EQ(p.question.size(), 9u + 1 + 9 + 1) << p.question;
    EXPECT_NE(p.question[0], '0');
    EXPECT_EQ(std::to_string(Evaluate(p.question)), p.answer);
  }
}

TEST(ArithDataTest, ParseOpsAndValidate) {
  auto ops = ParseArithOps("+,-,*");
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ(*ops, "+-*");
  EXPECT_TRUE(ParseArithOps("").status().IsInvalidArgument());
  EXPECT_TRUE(ParseArithOps("+,/").status().IsInvalidArgument());
  EXPECT_TRUE(ParseArithOps("+,").status().IsInvalidArgument());
  EXPECT_TRUE(ParseArithOps("++").status().IsInvalidArgument());

  ArithConfig c;
  EXPECT_TRUE(ValidateArithConfig(c).ok());
  c.max_digits = 10;
  EXPECT_TRUE(ValidateArithConfig(c).IsInvalidArgument());
  c.max_digits = 2;
  c.min_digits = 3;
  EXPECT_TRUE(ValidateArithConfig(c).IsInvalidArgument());
  c.min_digits = 1;
  c.ops = "";
  EXPECT_TRUE(ValidateArithConfig(c).IsInvalidArgument());
  c.ops = "/";
  EXPECT_TRUE(ValidateArithConfig(c).IsInvalidArgument());
  c.ops = "+";
  c.count = 0;
  EXPECT_TRUE(ValidateArithConfig(c).IsInvalidArgument());
}

// The file parses back through PromptDataset, and the SFT target of every
// record earns the full exact_match reward.
TEST(ArithDataTest, JsonlRoundTripsThroughPromptDataset) {
  TempDir dir;
  auto reward = MakeReward("exact_match", {});
  ASSERT_TRUE(reward.ok());
  for (bool chat : {false, true}) {
    ArithConfig config;
    config.count = 50;
    config.seed = 3;
    config.chat = chat;
    const std::string path = dir.path() + (chat ? "/chat.jsonl" : "/a.jsonl");
    ASSERT_TRUE(WriteArithJsonl(config, path).ok());
    auto data = PromptDataset::Load({path});
    ASSERT_TRUE(data.ok()) << data.status();
    ASSERT_EQ(data->size(), 50u);
    for (uint64_t i = 0; i < data->size(); ++i) {
      const PromptRecord& r = data->record(i);
      const ArithProblem p = MakeArithProblem(config, i);
      EXPECT_EQ(r.prompt.is_chat, chat);
      if (chat) {
        ASSERT_EQ(r.prompt.messages.size(), 1u);
        EXPECT_EQ(r.prompt.messages[0], (ChatMessage{"user", p.question}));
      } else {
        EXPECT_EQ(r.prompt.text, p.question);
      }
      EXPECT_EQ(r.answer, p.answer);
      EXPECT_EQ(ArithSftTarget(r), p.answer);
      RewardInput input;
      input.response = ArithSftTarget(r);
      input.ended_with_eos = true;
      input.answer = r.answer;
      input.fields = &r.fields;
      EXPECT_EQ((*reward)->Score(input), 1.0) << r.source;
    }
  }
  std::ifstream in(dir.path() + "/a.jsonl");
  std::string first;
  std::getline(in, first);
  ArithConfig seed3;
  seed3.seed = 3;
  EXPECT_EQ(first, ArithJsonLine(MakeArithProblem(seed3, 0), false));
  EXPECT_EQ(first.rfind("{\"prompt\":\"", 0), 0u) << first;

  EXPECT_TRUE(WriteArithJsonl({}, dir.path() + "/no/such/dir/x.jsonl").code() ==
              StatusCode::kIOError);
}

}  // namespace
}  // namespace hy::trainer
