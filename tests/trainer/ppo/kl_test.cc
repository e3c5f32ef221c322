#include <gtest/gtest.h>

#include <cmath>

#include "hy/trainer/ppo/advantage.h"

namespace hy::trainer {
namespace {

// logp -1.0, ref -1.2 (logp - ref = 0.2):
//   k1 0.2, abs 0.2, k2 0.5 * 0.04 = 0.02,
//   k3: kl = ref - logp = -0.2, exp(-0.2) + 0.2 - 1 = 0.0187307531
// logp -2, ref -1 (logp - ref = -1):
//   k1 -1, abs 1, k2 0.5, k3: kl = 1, e - 1 - 1 = 0.7182818285
TEST(KlTest, Estimators) {
  const std::vector<float> logp{-1.0f, -2.0f, -0.5f};
  const std::vector<float> ref{-1.2f, -1.0f, -0.5f};
  auto k1 = KlPenalty(logp, ref, KlEstimator::kK1);
  auto ab = KlPenalty(logp, ref, KlEstimator::kAbs);
  auto k2 = KlPenalty(logp, ref, KlEstimator::kK2);
  auto k3 = KlPenalty(logp, ref, KlEstimator::kK3);
  ASSERT_TRUE(k1.ok() && ab.ok() && k2.ok() && k3.ok());
  EXPECT_NEAR((*k1)[0], 0.2, 1e-6);
  EXPECT_NEAR((*k1)[1], -1.0, 1e-6);
  EXPECT_NEAR((*ab)[1], 1.0, 1e-6);
  EXPECT_NEAR((*k2)[0], 0.02, 1e-6);
  EXPECT_NEAR((*k2)[1], 0.5, 1e-6);
  EXPECT_NEAR((*k3)[0], std::exp(-0.2) + 0.2 - 1.0, 1e-6);
  EXPECT_NEAR((*k3)[0], 0.0187307531, 1e-6);
  EXPECT_NEAR((*k3)[1], std::exp(1.0) - 2.0, 1e-6);
  // Equal log-probs: every estimator is 0.
  EXPECT_EQ((*k1)[2], 0.0f);
  EXPECT_EQ((*k3)[2], 0.0f);
}

TEST(KlTest, K3ClampsAndIsNonNegative) {
  // ref - logp = 30 is clamped to 20 before exp; the result to 10.
  auto big = KlPenalty({-30.0f}, {0.0f}, KlEstimator::kK3);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ((*big)[0], 10.0f);
  // ref - logp = -30 is clamped to -20: exp(-20) + 20 - 1 -> clamped to 10.
  auto neg = KlPenalty({0.0f}, {-30.0f}, KlEstimator::kK3);
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ((*neg)[0], 10.0f);
  for (float d = -5.0f; d <= 5.0f; d += 0.25f) {
    auto k = KlPenalty({d}, {0.0f}, KlEstimator::kK3);
    ASSERT_TRUE(k.ok());
    EXPECT_GE((*k)[0], 0.0f);
  }
  EXPECT_TRUE(
      KlPenalty({0, 0}, {0}, KlEstimator::kK1).status().IsInvalidArgument());
}

// beta 0.5, scores [1, 0.5], shape [3][4]:
//   row 0: mask [1 1 1 0], kl [.1 .2 .3 9] -> [-.05, -.1, 1 - .15, 0]
//   row 1: mask [1 1 0 0], kl [.4 -.2 9 9] -> [-.2, .5 + .1, 0, 0]
//   row 2: nothing valid -> zeros, mean KL 0
//   mean_kl = (0.6/3 + 0.2/2 + 0) / 3 = 0.1
TEST(TokenRewardsTest, ScoreAtLastValidTokenMinusBetaKl) {
  const std::vector<float> kl{0.1f, 0.2f, 0.3f, 9, 0.4f, -0.2f,
                              9,    9,    5,    5, 5,    5};
  const Mask mask{1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0};
  auto r = ComputeTokenLevelRewards({1.0f, 0.5f, 7.0f}, kl, mask, {3, 4}, 0.5);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<float> want{-0.05f, -0.1f, 0.85f, 0, -0.2f, 0.6f,
                                0,      0,     0,     0, 0,     0};
  ASSERT_EQ(r->rewards.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(r->rewards[i], want[i], 1e-6) << i;
  }
  EXPECT_NEAR(r->mean_kl, 0.1, 1e-7);

  // beta 0: the bare task reward at the last valid token.
  auto bare = ComputeTokenLevelRewards({1.0f, 0.5f, 7.0f}, kl, mask, {3, 4}, 0);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->rewards[2], 1.0f);
  EXPECT_EQ(bare->rewards[5], 0.5f);
  EXPECT_EQ(bare->rewards[0], 0.0f);

  EXPECT_TRUE(ComputeTokenLevelRewards({1.0f}, kl, mask, {3, 4}, 0.5)
                  .status()
                  .IsInvalidArgument());
}

// verl: error = clip(kl / target - 1, -0.2, 0.2);
//       value *= 1 + error * n_steps / horizon.
TEST(KlControllerTest, AdaptiveFollowsVerl) {
  auto c = KlController::Adaptive(0.1, 6.0, 10000.0);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->adaptive());
  double want = 0.1;
  c->Update(9.0, 256);  // 9/6 - 1 = 0.5 -> clipped 0.2
  want *= 1.0 + 0.2 * 256 / 10000.0;
  EXPECT_DOUBLE_EQ(c->value(), want);
  EXPECT_NEAR(c->value(), 0.100512, 1e-12);
  c->Update(6.6, 100);  // 0.1 unclipped
  want *= 1.0 + 0.1 * 100 / 10000.0;
  EXPECT_DOUBLE_EQ(c->value(), want);
  c->Update(0.0, 1000);  // -1 -> clipped -0.2
  want *= 1.0 - 0.2 * 1000 / 10000.0;
  EXPECT_DOUBLE_EQ(c->value(), want);
  c->Update(6.0, 5000);  // On target: unchanged.
  EXPECT_DOUBLE_EQ(c->value(), want);
}

TEST(KlControllerTest, FixedAndErrors) {
  KlController f = KlController::Fixed(0.05);
  EXPECT_FALSE(f.adaptive());
  f.Update(100.0, 1000);
  EXPECT_DOUBLE_EQ(f.value(), 0.05);
  EXPECT_TRUE(
      KlController::Adaptive(0.1, 0.0, 10.0).status().IsInvalidArgument());
  EXPECT_TRUE(
      KlController::Adaptive(0.1, 1.0, 0.0).status().IsInvalidArgument());
}

}  // namespace
}  // namespace hy::trainer
