// SaveAsync's staging memory: released buffers come back for parts of the
// same size (so later snapshots write memory already faulted in), a small
// request never pins a much larger buffer, and no more than the budget is
// kept, pageable and page-locked buffers together.

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

// Host and GPU shards' snapshots share one budget: a store that saves both
// keeps no more than keep_bytes, not that much of each kind; a buffer goes
// back to the free list of its own kind and comes out only for that kind.
TEST(StagingPoolTest, PageableAndPageLockedShareOneBudget) {
  int locked_allocs = 0, locked_frees = 0;
  StagingPool::Allocator locked{[&](size_t n) {
                                  ++locked_allocs;
                                  return new uint8_t[n];
                                },
                                [&](uint8_t* p) {
                                  ++locked_frees;
                                  delete[] p;
                                }};
  constexpr StagingPool::Kind kLocked = StagingPool::Kind::kPageLocked;
  constexpr StagingPool::Kind kHost = StagingPool::Kind::kPageable;
  {
    StagingPool pool(10 << 20, StagingPool::HeapAllocator(), locked);
    StagingPool::Buffer host = pool.Acquire(6 << 20);
    StagingPool::Buffer gpu = pool.Acquire(6 << 20, kLocked);
    EXPECT_EQ(host.kind, kHost);
    EXPECT_EQ(gpu.kind, kLocked);
    EXPECT_EQ(locked_allocs, 1);
    uint8_t* gpu_mem = gpu.data.get();
    pool.Release(std::move(gpu));
    pool.Release(std::move(host));  // 12 MiB > 10: one of the two goes.
    EXPECT_EQ(pool.kept_bytes(), uint64_t{6} << 20);
    // Freed the larger, else (a tie) the pageable one: the locked is kept.
    EXPECT_EQ(pool.kept_bytes(kLocked), uint64_t{6} << 20);
    EXPECT_EQ(pool.kept_bytes(kHost), 0u);
    EXPECT_EQ(locked_frees, 0);
    // A host request does not take the page-locked buffer, and the other
    // way round.
    StagingPool::Buffer host2 = pool.Acquire(6 << 20);
    EXPECT_NE(host2.data.get(), gpu_mem);
    StagingPool::Buffer gpu2 = pool.Acquire(6 << 20, kLocked);
    EXPECT_EQ(gpu2.data.get(), gpu_mem);
    EXPECT_EQ(locked_allocs, 1);
    // A larger page-locked buffer makes the smaller host one stay and the
    // locked one go when both come back over budget.
    StagingPool::Buffer gpu3 = pool.Acquire(8 << 20, kLocked);
    pool.Release(std::move(host2));
    pool.Release(std::move(gpu3));  // 6 + 8 > 10: the 8 MiB locked goes.
    EXPECT_EQ(pool.kept_bytes(kHost), uint64_t{6} << 20);
    EXPECT_EQ(pool.kept_bytes(kLocked), 0u);
    EXPECT_EQ(locked_frees, 1);
    pool.Release(std::move(gpu2));  // 12 > 10: a tie, the host one goes.
    EXPECT_EQ(pool.kept_bytes(), uint64_t{6} << 20);
    EXPECT_EQ(pool.kept_bytes(kLocked), uint64_t{6} << 20);
  }
  EXPECT_EQ(locked_frees, locked_allocs);

  // Without a page-locked allocator the caller gets a null buffer and
  // falls back to pageable memory.
  StagingPool host_only(1 << 20);
  EXPECT_EQ(host_only.Acquire(4096, kLocked).data, nullptr);
}

}  // namespace
}  // namespace hy::statestore
