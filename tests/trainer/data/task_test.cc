#include "hy/trainer/data/task.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>

namespace hy::trainer {
namespace {

bool Same(const Sample& a, const Sample& b) {
  return a.kind == b.kind && a.prompt == b.prompt && a.answer == b.answer;
}

uint64_t ToNumber(const std::vector<int>& digits) {
  uint64_t v = 0;
  for (int d : digits) v = v * 10 + static_cast<uint64_t>(d);
  return v;
}

TEST(TaskTest, SameTripleSameSample) {
  const TaskConfig config;
  for (uint64_t i = 0; i < 50; ++i) {
    EXPECT_TRUE(Same(Generate(config, 42, 3, i), Generate(config, 42, 3, i)));
  }
}

TEST(TaskTest, DifferentTriplesDiffer) {
  TaskConfig config;
  config.min_digits = 6;  // Collisions of 6+ digit samples are negligible.
  config.max_digits = 8;
  const Sample base = Generate(config, 42, 3, 7);
  EXPECT_FALSE(Same(base, Generate(config, 43, 3, 7)));
  EXPECT_FALSE(Same(base, Generate(config, 42, 4, 7)));
  EXPECT_FALSE(Same(base, Generate(config, 42, 3, 8)));
}

// Any partition of the global indices over any world size sees the same
// samples as a single rank: contiguous chunks and strided assignment alike.
TEST(TaskTest, IndependentOfRankAndWorldSize) {
  const TaskConfig config;
  constexpr uint64_t kBatch = 60;
  std::vector<Sample> reference;
  for (uint64_t i = 0; i < kBatch; ++i) {
    reference.push_back(Generate(config, 9, 11, i));
  }
  for (uint64_t world : {1u, 2u, 3u, 4u, 7u, 8u}) {
    std::map<uint64_t, Sample> strided;
    std::map<uint64_t, Sample> chunked;
    const uint64_t chunk = (kBatch + world - 1) / world;
    for (uint64_t rank = 0; rank < world; ++rank) {
      for (uint64_t i = rank; i < kBatch; i += world) {
        strided[i] = Generate(config, 9, 11, i);
      }
      for (uint64_t i = rank * chunk; i < std::min(kBatch, (rank + 1) * chunk);
           ++i) {
        chunked[i] = Generate(config, 9, 11, i);
      }
    }
    ASSERT_EQ(strided.size(), kBatch);
    ASSERT_EQ(chunked.size(), kBatch);
    for (uint64_t i = 0; i < kBatch; ++i) {
      EXPECT_TRUE(Same(strided[i], reference[i])) << "world " << world;
      EXPECT_TRUE(Same(chunked[i], reference[i])) << "world " << world;
    }
  }
}

// Pins the stream: a change here breaks resuming old runs on the same data.
TEST(TaskTest, StreamIsPinned) {
  const TaskConfig config;
  EXPECT_EQ(Detokenize(SftSequence(Generate(config, 1, 0, 0))), "^R44=44$");
  EXPECT_EQ(Detokenize(SftSequence(Generate(config, 1, 0, 4))),
            "^A90+7024=7114$");
  EXPECT_EQ(Detokenize(SftSequence(Generate(config, 1, 5, 123))),
            "^S810532=012358$");
}

// Every sample is well formed and its answer right; kinds, lengths and
// digits are spread as configured.
TEST(TaskTest, DistributionSanity) {
  TaskConfig config;
  config.min_digits = 2;
  config.max_digits = 5;
  constexpr int kN = 3000;
  std::array<int, 3> kinds{};
  std::set<int> lengths;
  std::array<int, 10> digits{};
  int digit_total = 0;
  for (int i = 0; i < kN; ++i) {
    const Sample s = Generate(config, 2024, 1, static_cast<uint64_t>(i));
    ++kinds[static_cast<int>(s.kind)];
    ASSERT_GE(s.prompt.size(), 4u);
    EXPECT_EQ(s.prompt.front(), kBos);
    EXPECT_EQ(s.prompt.back(), kSep);
    ASSERT_FALSE(s.answer.empty());
    for (int t : s.answer) ASSERT_TRUE(t >= 0 && t <= 9);
    const std::vector<int> body(s.prompt.begin() + 2, s.prompt.end() - 1);
    switch (s.kind) {
      case TaskKind::kReverse:
      case TaskKind::kSort: {
        EXPECT_EQ(s.prompt[1], s.kind == TaskKind::kReverse ? kRev : kSort);
        lengths.insert(static_cast<int>(body.size()));
        std::vector<int> want = body;
        if (s.kind == TaskKind::kReverse) {
          std::reverse(want.begin(), want.end());
        } else {
          std::sort(want.begin(), want.end());
        }
        EXPECT_EQ(s.answer, want);
        for (int d : body) {
          ++digits[d];
          ++digit_total;
        }
        break;
      }
      case TaskKind::kAdd: {
        EXPECT_EQ(s.prompt[1], kAdd);
        auto plus = std::find(body.begin(), body.end(), kPlus);
        ASSERT_NE(plus, body.end());
        const std::vector<int> a(body.begin(), plus);
        const std::vector<int> b(plus + 1, body.end());
        ASSERT_GE(a.size(), 2u);
        ASSERT_LE(b.size(), 5u);
        EXPECT_NE(a.front(), 0);
        EXPECT_NE(b.front(), 0);
        EXPECT_NE(s.answer.front(), 0);
        EXPECT_EQ(ToNumber(s.answer), ToNumber(a) + ToNumber(b));
        break;
      }
    }
  }
  for (int k : kinds) {
    EXPECT_GT(k, kN * 0.28);
    EXPECT_LT(k, kN * 0.39);
  }
  EXPECT_EQ(lengths, (std::set<int>{2, 3, 4, 5}));
  for (int c : digits) {
    EXPECT_GT(c, digit_total * 0.085);
    EXPECT_LT(c, digit_total * 0.115);
  }
}

TEST(TaskTest, SingleKindAndSingleDigitAdd) {
  TaskConfig config;
  config.kinds = {TaskKind::kAdd};
  config.min_digits = config.max_digits = 1;
  for (uint64_t i = 0; i < 200; ++i) {
    const Sample s = Generate(config, 5, 0, i);
    ASSERT_EQ(s.kind, TaskKind::kAdd);
    ASSERT_EQ(s.prompt.size(), 6u);  // BOS ADD a PLUS b SEP
    EXPECT_EQ(ToNumber(s.answer),
              static_cast<uint64_t>(s.prompt[2] + s.prompt[4]));
  }
}

TEST(TaskTest, ValidateConfig) {
  EXPECT_TRUE(ValidateTaskConfig(TaskConfig{}).ok());
  TaskConfig c;
  c.kinds.clear();
  EXPECT_TRUE(ValidateTaskConfig(c).IsInvalidArgument());
  c = TaskConfig{};
  c.min_digits = 0;
  EXPECT_TRUE(ValidateTaskConfig(c).IsInvalidArgument());
  c = TaskConfig{};
  c.min_digits = 5;
  c.max_digits = 4;
  EXPECT_TRUE(ValidateTaskConfig(c).IsInvalidArgument());
  c = TaskConfig{};
  c.max_digits = kMaxTaskDigits + 1;
  EXPECT_TRUE(ValidateTaskConfig(c).IsInvalidArgument());
  c = TaskConfig{};
  c.kinds = {static_cast<TaskKind>(7)};
  EXPECT_TRUE(ValidateTaskConfig(c).IsInvalidArgument());
}

Sample ReverseOf123() {
  Sample s;
  s.kind = TaskKind::kReverse;
  s.prompt = {kBos, kRev, 1, 2, 3, kSep};
  s.answer = {3, 2, 1};
  return s;
}

TEST(TaskTest, RewardExactAndPartial) {
  const Sample s = ReverseOf123();
  EXPECT_DOUBLE_EQ(Reward(s, {3, 2, 1, kEos}), 1.0);
  // Tokens after the first EOS are ignored.
  EXPECT_DOUBLE_EQ(Reward(s, {3, 2, 1, kEos, 7, 7, kPad}), 1.0);
  // Right digits, no EOS: 0.5 * 3/3.
  EXPECT_DOUBLE_EQ(Reward(s, {3, 2, 1}), 0.5);
  // Two of three positions: 0.5 * 2/3.
  EXPECT_DOUBLE_EQ(Reward(s, {3, 9, 1, kEos}), 0.5 * 2.0 / 3.0);
  // Too short: 0.5 * 1/3.
  EXPECT_DOUBLE_EQ(Reward(s, {3, kEos}), 0.5 / 3.0);
  // Shifted answer matches nowhere.
  EXPECT_DOUBLE_EQ(Reward(s, {1, 3, 2, 1, kEos}), 0.0);
}

TEST(TaskTest, RewardEmptyAndOverlong) {
  const Sample s = ReverseOf123();
  EXPECT_DOUBLE_EQ(Reward(s, {}), 0.0);
  EXPECT_DOUBLE_EQ(Reward(s, {kEos}), 0.0);
  // Overlong: the answer then 2 extra digits: 0.5 * 3 / 5.
  EXPECT_DOUBLE_EQ(Reward(s, {3, 2, 1, 4, 4, kEos}), 0.3);
  // Overlong without EOS, junk tokens count as length too.
  EXPECT_DOUBLE_EQ(Reward(s, {3, 2, 1, kPad, kSep, kPad}), 0.25);
  for (const std::vector<int>& r :
       {std::vector<int>{3, 2}, {0, 0, 0, 0, 0, 0, 0, 0}, {kBos, 99, -1}}) {
    const double v = Reward(s, r);
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
  }
}

TEST(TaskTest, SftSequenceEarnsFullReward) {
  const TaskConfig config;
  for (uint64_t i = 0; i < 100; ++i) {
    const Sample s = Generate(config, 3, 2, i);
    const std::vector<int> seq = SftSequence(s);
    ASSERT_EQ(seq.size(), s.prompt.size() + s.answer.size() + 1);
    EXPECT_TRUE(std::equal(s.prompt.begin(), s.prompt.end(), seq.begin()));
    EXPECT_EQ(seq.back(), kEos);
    const std::vector<int> response(seq.begin() + s.prompt.size(), seq.end());
    EXPECT_DOUBLE_EQ(Reward(s, response), 1.0);
  }
}

TEST(TaskTest, TokenizeRoundTrip) {
  EXPECT_EQ(Detokenize({kBos, kAdd, 1, 2, kPlus, 9, kSep, 2, 1, kEos, kPad}),
            "^A12+9=21$_");
  EXPECT_EQ(Detokenize({kSort, kRev, 0, kVocabSize, -1}), "SR0??");
  auto t = Tokenize("^R0123456789=$_");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, (std::vector<int>{kBos, kRev, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                  kSep, kEos, kPad}));
  for (int id = 0; id < kVocabSize; ++id) {
    auto back = Tokenize(Detokenize({id}));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, std::vector<int>{id});
  }
  auto bad = Tokenize("^R1x");
  EXPECT_TRUE(bad.status().IsInvalidArgument());
  EXPECT_NE(bad.status().message().find("offset 3"), std::string_view::npos);
}

TEST(TaskTest, SamplingSeedIsPureAndSpread) {
  EXPECT_EQ(SamplingSeed(1, 2, 3, 4), SamplingSeed(1, 2, 3, 4));
  std::set<uint64_t> seen;
  for (uint64_t s = 0; s < 3; ++s) {
    for (uint64_t it = 0; it < 3; ++it) {
      for (uint64_t i = 0; i < 10; ++i) {
        for (uint64_t p = 0; p < 10; ++p) {
          seen.insert(SamplingSeed(s, it, i, p));
        }
      }
    }
  }
  EXPECT_EQ(seen.size(), 900u);
}

}  // namespace
}  // namespace hy::trainer
