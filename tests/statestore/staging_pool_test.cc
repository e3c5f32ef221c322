// SaveAsync's staging memory: released buffers come back for parts of the
// same size (so later snapshots write memory already faulted in), a small
// request never pins a much larger buffer, and no more than the budget is
// kept.

#include "staging_pool.h"

#include <gtest/gtest.h>

namespace hy::statestore {
namespace {

TEST(StagingPoolTest, ReusesReleasedBuffersOfTheSameSize) {
  StagingPool pool(64 << 20);
  StagingPool::Buffer a = pool.Acquire(10 << 20);
  StagingPool::Buffer b = pool.Acquire(3 << 20);
  uint8_t* a_mem = a.data.get();
  uint8_t* b_mem = b.data.get();
  pool.Release(std::move(a));
  pool.Release(std::move(b));
  EXPECT_EQ(pool.kept_bytes(), uint64_t{13} << 20);
  // Best fit: each request gets the buffer of its own size back.
  StagingPool::Buffer b2 = pool.Acquire(3 << 20);
  StagingPool::Buffer a2 = pool.Acquire(10 << 20);
  EXPECT_EQ(b2.data.get(), b_mem);
  EXPECT_EQ(a2.data.get(), a_mem);
  EXPECT_EQ(pool.kept_bytes(), 0u);
  pool.Release(std::move(a2));
  // 1 MiB must not take the 10 MiB buffer: a new one, the big one stays.
  StagingPool::Buffer small = pool.Acquire(1 << 20);
  EXPECT_NE(small.data.get(), a_mem);
  EXPECT_EQ(small.capacity, size_t{1} << 20);
  EXPECT_EQ(pool.kept_bytes(), uint64_t{10} << 20);
}

TEST(StagingPoolTest, KeepsNoMoreThanItsBudget) {
  StagingPool pool(8 << 20);
  StagingPool::Buffer a = pool.Acquire(6 << 20);
  StagingPool::Buffer b = pool.Acquire(4 << 20);
  pool.Release(std::move(a));
  pool.Release(std::move(b));  // 10 MiB > 8: the largest (6) goes.
  EXPECT_EQ(pool.kept_bytes(), uint64_t{4} << 20);

  StagingPool none(0);
  none.Release(none.Acquire(1 << 20));
  EXPECT_EQ(none.kept_bytes(), 0u);
  StagingPool::Buffer zero = none.Acquire(0);  // Empty blobs are fine.
  EXPECT_NE(zero.data, nullptr);
}

}  // namespace
}  // namespace hy::statestore
