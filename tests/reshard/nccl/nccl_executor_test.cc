// NcclExecutor end to end on device buffers. Without a GPU (or in a build
// without NCCL) only the error paths run; the rest skips. On one GPU: a
// single-rank plan's local copies, and the same plan with its copies moved
// into steps so that packing, ncclSend / ncclRecv to self and unpacking all
// run. On two or more GPUs: real multi-rank reshards, one thread per rank.

#include "hy/reshard/nccl_executor.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "hy/common/gpu.h"
#include "nccl_test_util.h"

namespace hy::reshard {
namespace {

using nccl_test::Bytes;

#define HY_SKIP_WITHOUT_GPUS(n)                                  \
  if (GpuDeviceCount() < (n)) {                                  \
    GTEST_SKIP() << "needs " << (n) << " CUDA device(s), found " \
                 << GpuDeviceCount();                            \
  }

TEST(NcclExecutorTest, WithoutGpuReportsUnavailable) {
  if (GpuDeviceCount() > 0) GTEST_SKIP() << "a GPU is present";
  auto comm = NcclCommunicator::Create(0, 1, nullptr);
  EXPECT_EQ(comm.status().code(), StatusCode::kUnavailable) << comm.status();
  EXPECT_NE(comm.status().message().find("CUDA"), std::string::npos)
      << comm.status();
  nccl_test::MemoryStore store;
  auto two = NcclCommunicator::Create(1, 2, &store);
  EXPECT_EQ(two.status().code(), StatusCode::kUnavailable) << two.status();
  auto buffer = DeviceBuffer::Allocate(0, 64);
  EXPECT_EQ(buffer.status().code(), StatusCode::kUnavailable)
      << buffer.status();
  // A plan alone does not get an executor either.
  auto plan =
      nccl_test::MakePlan(nccl_test::SmallModel(), "dp=1", "dp=1", 1, 1 << 20);
  ASSERT_NE(plan, nullptr);
  auto exec = NcclExecutor::Create(plan, nullptr);
  EXPECT_TRUE(exec.status().IsInvalidArgument()) << exec.status();
}

TEST(NcclExecutorTest, RejectsBadArgumentsBeforeTouchingADevice) {
  EXPECT_TRUE(
      NcclCommunicator::Create(2, 2, nullptr).status().IsInvalidArgument());
  EXPECT_TRUE(
      NcclCommunicator::Create(0, 0, nullptr).status().IsInvalidArgument());
  EXPECT_TRUE(
      NcclCommunicator::Create(1, 2, nullptr).status().IsInvalidArgument());
  NcclCommOptions no_time;
  no_time.timeout_ms = 0;
  EXPECT_TRUE(NcclCommunicator::Create(0, 1, nullptr, no_time)
                  .status()
                  .IsInvalidArgument());

  EXPECT_TRUE(
      NcclExecutor::Create(nullptr, nullptr).status().IsInvalidArgument());
  auto plan =
      nccl_test::MakePlan(nccl_test::SmallModel(), "dp=1", "dp=1", 1, 1 << 20);
  ASSERT_NE(plan, nullptr);
  NcclExecutorOptions delta;
  delta.sparse_delta = true;
  auto s = NcclExecutor::Create(plan, nullptr, delta).status();
  EXPECT_TRUE(s.IsInvalidArgument()) << s;
  EXPECT_NE(s.message().find("sparse delta"), std::string::npos) << s;
}

// One rank's buffers on its device.
struct RankBuffers {
  std::vector<DeviceBuffer> src;
  std::vector<DeviceBuffer> dst;

  std::vector<ConstBytes> In() const {
    std::vector<ConstBytes> v;
    for (const auto& b : src) v.push_back(b.view());
    return v;
  }
  std::vector<MutableBytes> Out() const {
    std::vector<MutableBytes> v;
    for (const auto& b : dst) v.push_back(b.mutable_view());
    return v;
  }
};

// Uploads `src` and allocates destinations of `dst_sizes` bytes filled with
// 0xCD.
RankBuffers Upload(int device, const std::vector<Bytes>& src,
                   const std::vector<Bytes>& dst_like) {
  RankBuffers out;
  for (const Bytes& b : src) {
    auto d = DeviceBuffer::Allocate(device, b.size());
    EXPECT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(d->CopyFromHost(b).ok());
    out.src.push_back(std::move(*d));
  }
  for (const Bytes& b : dst_like) {
    auto d = DeviceBuffer::Allocate(device, b.size());
    EXPECT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(d->Fill(0xCD).ok());
    out.dst.push_back(std::move(*d));
  }
  return out;
}

std::vector<Bytes> Download(const std::vector<DeviceBuffer>& bufs) {
  std::vector<Bytes> out;
  for (const auto& b : bufs) {
    Bytes h(b.size());
    EXPECT_TRUE(b.CopyToHost(0, h).ok());
    out.push_back(std::move(h));
  }
  return out;
}

// Runs `plan` for every rank, rank r on device r, `runs` times, and checks
// each rank's destinations against the shards cut from the globals.
void RunAndCheck(std::shared_ptr<const TransferPlan> plan, WireFormat wire,
                 int runs, ReshardStats* rank0_stats) {
  const ModelSpec& spec = plan->spec;
  const int world = plan->topology.world_size;
  const auto globals = nccl_test::RandomGlobals(spec, 23);
  nccl_test::MemoryStore store;
  std::vector<Status> status(world);
  std::vector<std::vector<Bytes>> got(world);
  std::vector<ReshardStats> stats(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      NcclCommOptions copts;
      copts.device = r;
      copts.timeout_ms = 60000;
      auto comm = NcclCommunicator::Create(r, world, &store, copts);
      if (!comm.ok()) {
        status[r] = comm.status();
        return;
      }
      NcclExecutorOptions options;
      options.wire = wire;
      auto exec = NcclExecutor::Create(plan, *comm, options);
      if (!exec.ok()) {
        status[r] = exec.status();
        return;
      }
      const RankBuffers bufs = Upload(
          r, nccl_test::Shards(spec, plan->src, r, globals, WireFormat::kRaw),
          nccl_test::Shards(spec, plan->dst, r, globals, wire));
      for (int i = 0; i < runs && status[r].ok(); ++i) {
        status[r] = (*exec)->Run(bufs.In(), bufs.Out(), &stats[r]);
      }
      got[r] = Download(bufs.dst);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    const auto want = nccl_test::Shards(spec, plan->dst, r, globals, wire);
    ASSERT_EQ(got[r].size(), want.size());
    for (size_t t = 0; t < want.size(); ++t) {
      EXPECT_TRUE(got[r][t] == want[t])
          << "rank " << r << " tensor " << spec.tensors[t].meta.name << " "
          << WireFormatName(wire);
    }
  }
  if (rank0_stats != nullptr) *rank0_stats = stats[0];
}

class SingleGpuTest : public ::testing::TestWithParam<WireFormat> {};

TEST_P(SingleGpuTest, LocalPlan) {
  HY_SKIP_WITHOUT_GPUS(1);
  std::printf("GPU 0: %s\n", GpuDeviceName(0).c_str());
  auto plan =
      nccl_test::MakePlan(nccl_test::SmallModel(), "dp=1", "dp=1", 1, 1 << 20);
  ASSERT_NE(plan, nullptr);
  ReshardStats stats;
  RunAndCheck(plan, GetParam(), 2, &stats);
  EXPECT_GT(stats.local_bytes, 0);
  EXPECT_EQ(stats.wire_bytes_sent, 0);
  EXPECT_EQ(stats.steps, 0);
  EXPECT_GE(stats.unpack_seconds, 0);
}

TEST_P(SingleGpuTest, StepsSendToSelf) {
  HY_SKIP_WITHOUT_GPUS(1);
  auto local =
      nccl_test::MakePlan(nccl_test::SmallModel(), "dp=1", "dp=1", 1, 1 << 20);
  ASSERT_NE(local, nullptr);
  auto plan =
      std::make_shared<const TransferPlan>(LocalCopiesAsSteps(*local, 3));
  ReshardStats stats;
  RunAndCheck(plan, GetParam(), 3, &stats);
  EXPECT_EQ(stats.local_bytes, 0);
  EXPECT_GT(stats.wire_bytes_sent, 0);
  EXPECT_EQ(stats.wire_bytes_sent, stats.wire_bytes_received);
  EXPECT_EQ(stats.steps, 3);
  EXPECT_GE(stats.pack_seconds, 0);
  EXPECT_GE(stats.transfer_seconds, 0);
  EXPECT_GE(stats.unpack_seconds, 0);
  EXPECT_GT(stats.pack_seconds + stats.transfer_seconds + stats.unpack_seconds,
            0);
  EXPECT_GE(stats.total_seconds, stats.transfer_seconds);
}

INSTANTIATE_TEST_SUITE_P(Wires, SingleGpuTest,
                         ::testing::Values(WireFormat::kRaw, WireFormat::kBf16),
                         [](const ::testing::TestParamInfo<WireFormat>& info) {
                           return std::string(WireFormatName(info.param));
                         });

TEST(NcclExecutorTest, RunRejectsBadBuffers) {
  HY_SKIP_WITHOUT_GPUS(1);
  auto plan =
      nccl_test::MakePlan(nccl_test::SmallModel(), "dp=1", "dp=1", 1, 1 << 20);
  ASSERT_NE(plan, nullptr);
  NcclCommOptions copts;
  copts.device = 0;
  auto comm = NcclCommunicator::Create(0, 1, nullptr, copts);
  ASSERT_TRUE(comm.ok()) << comm.status();
  auto exec = NcclExecutor::Create(plan, *comm);
  ASSERT_TRUE(exec.ok()) << exec.status();
  const auto globals = nccl_test::RandomGlobals(plan->spec, 3);
  const auto src =
      nccl_test::Shards(plan->spec, plan->src, 0, globals, WireFormat::kRaw);
  RankBuffers bufs = Upload(0, src, src);
  auto in = bufs.In();
  auto out = bufs.Out();
  // Too few buffers.
  auto fewer = in;
  fewer.pop_back();
  EXPECT_TRUE((*exec)->Run(fewer, out, nullptr).IsInvalidArgument());
  // A wrong size.
  auto shorter = out;
  shorter[0] = MutableBytes(shorter[0].data(), shorter[0].size() - 1);
  EXPECT_TRUE((*exec)->Run(in, shorter, nullptr).IsInvalidArgument());
  // Host memory.
  std::vector<Bytes> host = src;
  std::vector<ConstBytes> host_in;
  for (const auto& b : host) host_in.emplace_back(b.data(), b.size());
  const Status s = (*exec)->Run(host_in, out, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s;
  // None of that hurt the communicator.
  EXPECT_FALSE((*comm)->aborted());
  EXPECT_TRUE((*exec)->Run(in, out, nullptr).ok());
  EXPECT_GT((*exec)->staging_bytes(), 0);
}

TEST(NcclExecutorTest, UniqueIdGoesThroughTheStore) {
  HY_SKIP_WITHOUT_GPUS(1);
  nccl_test::MemoryStore store;
  NcclCommOptions copts;
  copts.device = 0;
  copts.store_key = "test/id";
  auto comm = NcclCommunicator::Create(0, 1, &store, copts);
  ASSERT_TRUE(comm.ok()) << comm.status();
  auto id = store.Get("test/id");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->size(), 256u);
  // A rank that reads something else from the store says so.
  ASSERT_TRUE(store.Set("test/bad", "not an id").ok());
  copts.store_key = "test/bad";
  auto bad = NcclCommunicator::Create(1, 2, &store, copts);
  EXPECT_TRUE(bad.status().IsInvalidArgument()) << bad.status();
}

TEST(NcclExecutorTest, TwoGpus) {
  HY_SKIP_WITHOUT_GPUS(2);
  const ModelSpec spec = nccl_test::SmallModel();
  for (WireFormat wire : {WireFormat::kRaw, WireFormat::kBf16}) {
    RunAndCheck(nccl_test::MakePlan(spec, "tp=2", "fsdp=2", 2, 512), wire, 2,
                nullptr);
    RunAndCheck(nccl_test::MakePlan(spec, "fsdp=2", "pp=2", 2, 1 << 20), wire,
                1, nullptr);
  }
}

TEST(NcclExecutorTest, FourGpus) {
  HY_SKIP_WITHOUT_GPUS(4);
  const ModelSpec spec = nccl_test::SmallModel();
  for (WireFormat wire : {WireFormat::kRaw, WireFormat::kBf16}) {
    RunAndCheck(nccl_test::MakePlan(spec, "tp=2,dp=2", "fsdp=4", 4, 256), wire,
                2, nullptr);
    RunAndCheck(nccl_test::MakePlan(spec, "tp=2,pp=2", "tp=4", 4, 1000), wire,
                1, nullptr);
  }
}

}  // namespace
}  // namespace hy::reshard
