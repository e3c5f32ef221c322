// NcclCommunicator's collectives (AllGather, ReduceScatterSum, AllReduceSum)
// on device buffers, against the same sums taken on the host. Without a GPU
// (or without NCCL) only the error path runs; with one GPU a world of one;
// with more, one thread per GPU, every GPU a rank.

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "hy/common/gpu.h"
#include "hy/reshard/nccl_executor.h"
#include "nccl_test_util.h"

namespace hy::reshard {
namespace {

// Rank r's value of element i: small integers, so every sum is exact and
// the result does not depend on NCCL's reduction order.
float Value(int r, size_t i) { return static_cast<float>((r + 1) * (i % 7)); }

TEST(NcclCollectivesTest, WithoutGpuOrNcclTheyAreUnavailable) {
  if (GpuDeviceCount() > 0) GTEST_SKIP() << "a GPU is present";
  // No communicator can be made here; its stubs say why.
  EXPECT_TRUE(NcclCommunicator::Create(0, 1, nullptr).status().code() ==
              StatusCode::kUnavailable);
}

TEST(NcclCollectivesTest, MatchHostSums) {
  const int world = GpuDeviceCount();
  if (world == 0) GTEST_SKIP() << "needs a CUDA device";
  constexpr size_t kCount = 1000;
  nccl_test::MemoryStore store;
  std::vector<Status> status(world);
  std::vector<std::vector<float>> gathered(world), scattered(world),
      reduced(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto run = [&]() -> Status {
        NcclCommOptions copts;
        copts.device = r;
        copts.timeout_ms = 60000;
        copts.store_key = "test/collectives";
        HY_ASSIGN_OR_RETURN(auto comm,
                            NcclCommunicator::Create(r, world, &store, copts));
        const size_t all = kCount * world;
        std::vector<float> mine(all);
        for (size_t i = 0; i < all; ++i) mine[i] = Value(r, i);
        HY_ASSIGN_OR_RETURN(DeviceBuffer in,
                            DeviceBuffer::Allocate(r, all * sizeof(float)));
        HY_ASSIGN_OR_RETURN(DeviceBuffer out,
                            DeviceBuffer::Allocate(r, all * sizeof(float)));
        auto host = [](const std::vector<float>& v) {
          return ConstBytes(reinterpret_cast<const uint8_t*>(v.data()),
                            v.size() * sizeof(float));
        };
        auto fetch = [&](size_t n, std::vector<float>* v) {
          v->resize(n);
          return out.CopyToHost(
              0, MutableBytes(reinterpret_cast<uint8_t*>(v->data()),
                              n * sizeof(float)));
        };
        auto* in_f = reinterpret_cast<float*>(in.data());
        auto* out_f = reinterpret_cast<float*>(out.data());
        // Each rank's first kCount elements, gathered.
        HY_RETURN_IF_ERROR(in.CopyFromHost(host(mine)));
        HY_RETURN_IF_ERROR(comm->AllGather(in_f, out_f, kCount));
        HY_RETURN_IF_ERROR(fetch(all, &gathered[r]));
        HY_RETURN_IF_ERROR(comm->ReduceScatterSum(in_f, out_f, kCount));
        HY_RETURN_IF_ERROR(fetch(kCount, &scattered[r]));
        HY_RETURN_IF_ERROR(comm->AllReduceSum(in_f, all));
        HY_RETURN_IF_ERROR(in.CopyToHost(
            0, MutableBytes(reinterpret_cast<uint8_t*>(mine.data()),
                            all * sizeof(float))));
        reduced[r] = mine;
        // Nothing to do for zero elements, and null buffers are refused.
        HY_RETURN_IF_ERROR(comm->AllReduceSum(nullptr, 0));
        if (!comm->AllGather(nullptr, out_f, 1).IsInvalidArgument()) {
          return Status::Internal("a null buffer was accepted");
        }
        return Status::OK();
      };
      status[r] = run();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    for (int p = 0; p < world; ++p) {
      for (size_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(gathered[r][p * kCount + i], Value(p, i));
      }
    }
    for (size_t i = 0; i < kCount; ++i) {
      float sum = 0;
      for (int p = 0; p < world; ++p) sum += Value(p, r * kCount + i);
      ASSERT_EQ(scattered[r][i], sum);
    }
    for (size_t i = 0; i < kCount * world; ++i) {
      float sum = 0;
      for (int p = 0; p < world; ++p) sum += Value(p, i);
      ASSERT_EQ(reduced[r][i], sum);
    }
  }
}

}  // namespace
}  // namespace hy::reshard
