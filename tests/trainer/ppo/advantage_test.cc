#include "hy/trainer/ppo/advantage.h"

#include <gtest/gtest.h>

#include <cmath>

namespace hy::trainer {
namespace {

GaeConfig Raw(double gamma, double lam) {
  GaeConfig c;
  c.gamma = gamma;
  c.lam = lam;
  c.whiten_advantages = false;
  return c;
}

// gamma = lam = 0.5, one row of three valid tokens:
//   rewards [0, 0, 1], values [0.5, 0.25, 0.5]
//   t=2: delta = 1 + 0.5*0    - 0.5  =  0.5
//        gae   = delta                          =  0.5
//   t=1: delta = 0 + 0.5*0.5  - 0.25 =  0
//        gae   = 0 + 0.25*0.5                   =  0.125
//   t=0: delta = 0 + 0.5*0.25 - 0.5  = -0.375
//        gae   = -0.375 + 0.25*0.125            = -0.34375
//   returns = adv + values = [0.15625, 0.375, 1.0]
// (all binary fractions, so the comparisons are exact).
TEST(GaeTest, HandComputed) {
  auto r = ComputeGae({0, 0, 1}, {0.5f, 0.25f, 0.5f}, {1, 1, 1}, {1, 3},
                      Raw(0.5, 0.5));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->advantages, (std::vector<float>{-0.34375f, 0.125f, 0.5f}));
  EXPECT_EQ(r->returns, (std::vector<float>{0.15625f, 0.375f, 1.0f}));
}

// gamma = lam = 1: adv_t = (sum of rewards from t on) - v_t.
TEST(GaeTest, GammaLambdaOneIsMonteCarloMinusValue) {
  auto r = ComputeGae({0.5f, 0, 2}, {1, 2, 3}, {1, 1, 1}, {1, 3}, Raw(1, 1));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->advantages, (std::vector<float>{1.5f, 0.0f, -1.0f}));
  EXPECT_EQ(r->returns, (std::vector<float>{2.5f, 2.0f, 2.0f}));
}

// The same row as HandComputed, with a masked token in the middle and one
// at the end (rewards 9 and 7, values 100 there: none of them may leak):
//   mask    [1,   1,    0,   1,   0]
//   rewards [0,   0,    9,   1,   7]
//   values  [0.5, 0.25, 100, 0.5, 100]
//   t=4 masked: next_value 0, gae 0 carried -> adv 0, return 0 + 100
//   t=3: delta = 1 - 0.5 = 0.5 -> adv 0.5, return 1.0
//   t=2 masked: carries 0.5 -> adv 0.5, return 0.5 + 100
//   t=1, t=0 as before: 0.125, -0.34375
TEST(GaeTest, MaskedTokensAreSkipped) {
  auto r = ComputeGae({0, 0, 9, 1, 7}, {0.5f, 0.25f, 100, 0.5f, 100},
                      {1, 1, 0, 1, 0}, {1, 5}, Raw(0.5, 0.5));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->advantages,
            (std::vector<float>{-0.34375f, 0.125f, 0.5f, 0.5f, 0.0f}));
  EXPECT_EQ(r->returns,
            (std::vector<float>{0.15625f, 0.375f, 100.5f, 1.0f, 100.0f}));
}

// Rows are independent: a padded second row does not change the first.
TEST(GaeTest, RowsAreIndependent) {
  auto two = ComputeGae({0, 0, 1, 0, 0, 3, 0, 5, 5},
                        {0.5f, 0.25f, 0.5f, 1, 1, 1, 1, 1, 1},
                        {1, 1, 1, 1, 1, 0, 0, 0, 0}, {3, 3}, Raw(0.5, 0.5));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(
      std::vector<float>(two->advantages.begin(), two->advantages.begin() + 3),
      (std::vector<float>{-0.34375f, 0.125f, 0.5f}));
  // Row 1: mask [1, 1, 0], rewards [0, 0, 3], values 1: t=1 delta -1,
  // t=0 delta 0 + 0.5*1 - 1 = -0.5, gae -0.5 + 0.25*(-1) = -0.75.
  EXPECT_EQ(two->advantages[3], -0.75f);
  EXPECT_EQ(two->advantages[4], -1.0f);
  EXPECT_EQ(two->advantages[5], 0.0f);
  // Row 2: nothing valid: all zero advantages.
  for (int i = 6; i < 9; ++i) EXPECT_EQ(two->advantages[i], 0.0f);
}

TEST(GaeTest, WhitensAdvantagesNotReturns) {
  const std::vector<float> rewards{0, 0, 9, 1, 7};
  const std::vector<float> values{0.5f, 0.25f, 100, 0.5f, 100};
  const Mask mask{1, 1, 0, 1, 0};
  auto raw = ComputeGae(rewards, values, mask, {1, 5}, Raw(0.5, 0.5));
  GaeConfig c = Raw(0.5, 0.5);
  c.whiten_advantages = true;
  auto w = ComputeGae(rewards, values, mask, {1, 5}, c);
  ASSERT_TRUE(raw.ok() && w.ok());
  EXPECT_EQ(w->returns, raw->returns);
  auto expect = MaskedWhiten(raw->advantages, mask, {1, 5});
  ASSERT_TRUE(expect.ok());
  EXPECT_EQ(w->advantages, *expect);
}

TEST(GaeTest, RejectsBadInput) {
  EXPECT_TRUE(ComputeGae({0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 3}, Raw(1, 1))
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(ComputeGae({0, 0, 0}, {0, 0, 0}, {1, 1}, {1, 3}, Raw(1, 1))
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(ComputeGae({0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 3}, Raw(1.5, 1))
                  .status()
                  .IsInvalidArgument());
  GaeConfig c = Raw(1, 1);
  c.whiten_advantages = true;  // One valid token: no unbiased variance.
  EXPECT_TRUE(ComputeGae({0, 0, 0}, {0, 0, 0}, {1, 0, 0}, {1, 3}, c)
                  .status()
                  .IsInvalidArgument());
}

// values [1, 2, 3, 1000], mask [1, 1, 1, 0]: mean 2, unbiased var
// ((1 + 0 + 1) / 3) * 3/2 = 1, so out = (v - 2) / sqrt(1 + 1e-8).
TEST(WhitenTest, MaskedUnbiased) {
  const double s = 1.0 / std::sqrt(1.0 + 1e-8);
  auto w = MaskedWhiten({1, 2, 3, 1000}, {1, 1, 1, 0}, {2, 2});
  ASSERT_TRUE(w.ok());
  EXPECT_FLOAT_EQ((*w)[0], static_cast<float>(-s));
  EXPECT_FLOAT_EQ((*w)[1], 0.0f);
  EXPECT_FLOAT_EQ((*w)[2], static_cast<float>(s));
  EXPECT_FLOAT_EQ((*w)[3], static_cast<float>(998 * s));
  auto keep = MaskedWhiten({1, 2, 3, 1000}, {1, 1, 1, 0}, {2, 2},
                           /*shift_mean=*/false);
  ASSERT_TRUE(keep.ok());
  EXPECT_FLOAT_EQ((*keep)[0], static_cast<float>(2 - s));
  EXPECT_FLOAT_EQ((*keep)[2], static_cast<float>(2 + s));
}

// [1, 2, 3, 4]: mean 2.5, squares 2.25 + .25 + .25 + 2.25 = 5, var 5/3.
TEST(WhitenTest, AllValid) {
  auto w = MaskedWhiten({1, 2, 3, 4}, {1, 1, 1, 1}, {1, 4});
  ASSERT_TRUE(w.ok());
  const double sd = std::sqrt(5.0 / 3.0 + 1e-8);
  EXPECT_FLOAT_EQ((*w)[0], static_cast<float>(-1.5 / sd));
  EXPECT_FLOAT_EQ((*w)[3], static_cast<float>(1.5 / sd));
  double mean = 0, sq = 0;
  for (float v : *w) mean += v / 4;
  for (float v : *w) sq += (v - mean) * (v - mean) / 3;
  EXPECT_NEAR(mean, 0.0, 1e-6);
  EXPECT_NEAR(sq, 1.0, 1e-6);
}

TEST(WhitenTest, Errors) {
  EXPECT_TRUE(
      MaskedWhiten({1, 2}, {1, 0}, {1, 2}).status().IsInvalidArgument());
  EXPECT_TRUE(
      MaskedWhiten({1, 2}, {1, 1}, {1, 3}).status().IsInvalidArgument());
  EXPECT_TRUE(MaskedMean({1, 2}, {0, 0}, {1, 2}).status().IsInvalidArgument());
  auto m = MaskedMean({1, 2, 6}, {1, 0, 1}, {1, 3});
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(*m, 3.5);
}

// Groups: 7 -> scores {1, 0, 0.5}: mean 0.5, unbiased std
// sqrt((.25 + .25 + 0) / 2) = 0.5; 3 -> {1, 1}: std 0, advantages 0;
// 9 -> {0.8} alone: mean 0, std 1 (as verl).
TEST(GrpoTest, GroupRelative) {
  const double eps = 1e-6;
  const std::vector<float> scores{1, 0, 1, 0.5f, 1, 0.8f};
  const std::vector<int64_t> groups{7, 7, 3, 7, 3, 9};
  Mask mask(12, 1);
  mask[1] = 0;  // Row 0, t=1 masked.
  auto a = ComputeGrpoAdvantages(scores, groups, mask, {6, 2}, eps);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FLOAT_EQ((*a)[0], static_cast<float>(0.5 / (0.5 + eps)));
  EXPECT_EQ((*a)[1], 0.0f);
  EXPECT_FLOAT_EQ((*a)[2], static_cast<float>(-0.5 / (0.5 + eps)));
  EXPECT_FLOAT_EQ((*a)[3], static_cast<float>(-0.5 / (0.5 + eps)));
  EXPECT_EQ((*a)[4], 0.0f);
  EXPECT_EQ((*a)[6], 0.0f);
  EXPECT_FLOAT_EQ((*a)[10], static_cast<float>(0.8 / (1 + eps)));
  EXPECT_FLOAT_EQ((*a)[11], static_cast<float>(0.8 / (1 + eps)));

  auto dr = ComputeGrpoAdvantages(scores, groups, mask, {6, 2}, eps,
                                  /*norm_by_std=*/false);
  ASSERT_TRUE(dr.ok());
  EXPECT_FLOAT_EQ((*dr)[0], 0.5f);
  EXPECT_FLOAT_EQ((*dr)[2], -0.5f);
  EXPECT_FLOAT_EQ((*dr)[6], 0.0f);
  EXPECT_FLOAT_EQ((*dr)[10], 0.8f);
}

TEST(GrpoTest, RejectsBadShapes) {
  EXPECT_TRUE(ComputeGrpoAdvantages({1, 2}, {0}, {1, 1}, {2, 1})
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(ComputeGrpoAdvantages({1, 2}, {0, 0}, {1, 1, 1}, {2, 1})
                  .status()
                  .IsInvalidArgument());
}

}  // namespace
}  // namespace hy::trainer
