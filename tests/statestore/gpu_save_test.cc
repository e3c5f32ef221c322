// SaveAsync of shards in CUDA memory (ShardData::on_gpu): refused with a
// clear status where no GPU is usable and by the paths that read in place,
// nothing saved; the page-locked staging pool's buffers live as long as the
// pool and are reused (a counting fake allocator); with a GPU, a device
// buffer round-trips bitwise (skipped without one).

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "hy/common/gpu.h"
#include "staging_pool.h"
#include "store_test_util.h"

namespace hy::statestore {
namespace {

using testing::Bytes;
using testing::Commit;
using testing::SmallChunks;
using testing::TempDir;
using testing::WholeShard;

// Counts what the pool asks of its allocator; fails on demand.
struct CountingAllocator {
  int allocations = 0;
  int frees = 0;
  bool fail = false;
  StagingPool::Allocator Get() {
    return {[this](size_t n) -> uint8_t* {
              if (fail) return nullptr;
              ++allocations;
              return new uint8_t[n];
            },
            [this](uint8_t* p) {
              ++frees;
              delete[] p;
            }};
  }
};

TEST(PinnedStagingTest, BuffersComeFromTheAllocatorAndLiveAsLongAsThePool) {
  CountingAllocator a;
  {
    StagingPool pool(8 << 20, StagingPool::HeapAllocator(), a.Get());
    constexpr StagingPool::Kind kLocked = StagingPool::Kind::kPageLocked;
    StagingPool::Buffer b = pool.Acquire(4 << 20, kLocked);
    ASSERT_NE(b.data, nullptr);
    uint8_t* mem = b.data.get();
    EXPECT_EQ(a.allocations, 1);
    pool.Release(std::move(b));
    EXPECT_EQ(a.frees, 0);  // Kept for the next save.
    StagingPool::Buffer again = pool.Acquire(4 << 20, kLocked);
    EXPECT_EQ(again.data.get(), mem);  // The same pages, no new allocation.
    EXPECT_EQ(a.allocations, 1);
    StagingPool::Buffer big = pool.Acquire(6 << 20, kLocked);
    pool.Release(std::move(again));
    pool.Release(std::move(big));  // 10 MiB > 8: the largest is freed.
    EXPECT_EQ(a.allocations, 2);
    EXPECT_EQ(a.frees, 1);
    a.fail = true;
    StagingPool::Buffer none = pool.Acquire(16 << 20, kLocked);
    EXPECT_EQ(none.data, nullptr);  // The caller falls back.
    EXPECT_EQ(none.capacity, 0u);
  }
  EXPECT_EQ(a.frees, a.allocations);  // The pool's end frees what it kept.
}

SavePart GpuPart(uint64_t version, const std::vector<uint8_t>& host) {
  SavePart part{version, 0, {}, {}};
  part.shards.push_back(WholeShard("w", DType::kF32, {2048}, host));
  part.shards.push_back(WholeShard("g", DType::kF32, {2048}, host));
  part.shards[1].on_gpu = true;
  return part;
}

TEST(GpuSaveTest, ReadInPlacePathsRefuseGpuShardsAndSaveNothing) {
  TempDir dir;
  auto store = std::move(Store::Open(dir.path(), SmallChunks())).value();
  const std::vector<uint8_t> host = Bytes(8192, 3);
  Status s = store->Save(GpuPart(1, host), nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s;
  EXPECT_NE(s.ToString().find("tensor 'g' is in CUDA memory"),
            std::string::npos)
      << s;
  auto borrowed = store->SaveBorrowed(GpuPart(1, host));
  ASSERT_FALSE(borrowed.ok());
  EXPECT_TRUE(borrowed.status().IsInvalidArgument()) << borrowed.status();
  EXPECT_TRUE(store->ListVersions().value().empty());
}

TEST(GpuSaveTest, WithoutAGpuSaveAsyncSaysSoAndSavesNothing) {
  if (GpuDeviceCount() > 0) GTEST_SKIP() << "a GPU is here";
  TempDir dir;
  auto store = std::move(Store::Open(dir.path(), SmallChunks())).value();
  const std::vector<uint8_t> host = Bytes(8192, 4);
  auto h = store->SaveAsync(GpuPart(1, host));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kUnavailable) << h.status();
  EXPECT_NE(h.status().ToString().find("tensor 'g' is in CUDA memory and no "
                                       "CUDA device is usable"),
            std::string::npos)
      << h.status();
  EXPECT_TRUE(store->ListVersions().value().empty());
  // The store goes on: the same version saves from host memory.
  SavePart ok = GpuPart(1, host);
  ok.shards[1].on_gpu = false;
  auto h2 = store->SaveAsync(std::move(ok));
  ASSERT_TRUE(h2.ok()) << h2.status();
  ASSERT_TRUE((*h2)->Wait(nullptr).ok());
  ASSERT_TRUE(store->Commit(Commit(1)).ok());
}

TEST(GpuSaveTest, DeviceBufferRoundTripsAndItsStagingIsReused) {
  if (GpuDeviceCount() == 0) GTEST_SKIP() << "no GPU";
  TempDir dir;
  auto store = std::move(Store::Open(dir.path(), SmallChunks())).value();
  const std::vector<uint8_t> host = Bytes(8192, 5);
  Result<void*> dev = GpuAlloc(host.size());
  ASSERT_TRUE(dev.ok()) << dev.status();
  ASSERT_TRUE(GpuCopy(*dev, host.data(), host.size()).ok());
  for (uint64_t v = 1; v <= 2; ++v) {
    SavePart part = GpuPart(v, host);
    part.shards[1].data =
        ConstBytes(static_cast<const uint8_t*>(*dev), host.size());
    auto h = store->SaveAsync(std::move(part));
    ASSERT_TRUE(h.ok()) << h.status();
    ASSERT_TRUE((*h)->Wait(nullptr).ok());
    ASSERT_TRUE(store->Commit(Commit(v)).ok());
    std::vector<uint8_t> back(host.size());
    ASSERT_TRUE(store
                    ->ReadRegion(v, "g", FlatRun{0, 2048},
                                 MutableBytes(back.data(), back.size()))
                    .ok());
    EXPECT_EQ(back, host);
  }
  GpuFree(*dev);
}

}  // namespace
}  // namespace hy::statestore
