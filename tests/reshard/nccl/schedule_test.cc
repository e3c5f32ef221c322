// The NCCL executor's schedule, checked on the host (no GPU): every rank's
// copy ops are applied with the kernel's host reference and the buckets
// "sent" by memcpy between the ranks' schedules, so the layouts the two ends
// of each send / receive compute must agree for the destinations to come
// out right.

#include "schedule.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "copy_ops.h"
#include "nccl_test_util.h"

namespace hy::reshard::nccl_internal {
namespace {

using nccl_test::Bytes;

// Runs the whole plan for every rank on host buffers through the ranks'
// schedules; returns each rank's destination shards.
std::vector<std::vector<Bytes>> Simulate(
    const TransferPlan& plan, WireFormat wire,
    const std::vector<std::vector<Bytes>>& src) {
  const int world = plan.topology.world_size;
  std::vector<Schedule> sched;
  for (int r = 0; r < world; ++r) {
    auto s = BuildSchedule(plan, r, wire);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return {};
    sched.push_back(std::move(*s));
  }
  std::vector<std::vector<Bytes>> dst(world);
  std::vector<std::vector<const uint8_t*>> src_bases(world);
  std::vector<std::vector<uint8_t*>> dst_bases(world);
  for (int r = 0; r < world; ++r) {
    for (int t = 0; t < static_cast<int>(plan.spec.tensors.size()); ++t) {
      const DType d = WireDType(plan.spec.tensors[t].meta.dtype, wire);
      dst[r].emplace_back(plan.dst.Get(r, t).num_elements * DTypeSize(d), 0xCD);
      src_bases[r].push_back(src[r][t].data());
    }
    for (auto& b : dst[r]) dst_bases[r].push_back(b.data());
    ApplyCopyOpsOnHost(sched[r].ops.data(), sched[r].local_end,
                       src_bases[r].data(), dst_bases[r].data(), nullptr,
                       nullptr);
  }
  for (int k = 0; k < static_cast<int>(plan.steps.size()); ++k) {
    std::vector<const StepWork*> work(world, nullptr);
    std::vector<Bytes> send(world);
    std::vector<Bytes> recv(world);
    for (int r = 0; r < world; ++r) {
      for (const StepWork& w : sched[r].steps) {
        if (w.step == k) work[r] = &w;
      }
      if (work[r] == nullptr) continue;
      const StepWork& w = *work[r];
      EXPECT_LE(w.send_bytes, sched[r].max_send_bytes);
      send[r].assign(w.send_bytes, 0xEE);
      recv[r].assign(w.recv_bytes, 0xEE);
      ApplyCopyOpsOnHost(sched[r].ops.data() + w.pack_begin,
                         w.pack_end - w.pack_begin, src_bases[r].data(),
                         nullptr, nullptr, send[r].data());
    }
    // The exchange: each send bucket must match the receiver's bucket for
    // this sender in size.
    for (int r = 0; r < world; ++r) {
      if (work[r] == nullptr) continue;
      for (const PeerBucket& b : work[r]->sends) {
        EXPECT_EQ(b.offset % kBucketAlign, 0);
        const StepWork* peer = work[b.peer];
        EXPECT_NE(peer, nullptr) << "step " << k << " " << r << "->" << b.peer;
        if (peer == nullptr) return {};
        bool found = false;
        for (const PeerBucket& in : peer->recvs) {
          if (in.peer != r) continue;
          found = true;
          EXPECT_EQ(in.bytes, b.bytes)
              << "step " << k << " " << r << "->" << b.peer;
          if (in.bytes != b.bytes) return {};
          std::memcpy(recv[b.peer].data() + in.offset,
                      send[r].data() + b.offset, b.bytes);
        }
        EXPECT_TRUE(found) << "step " << k << " " << r << "->" << b.peer;
      }
    }
    for (int r = 0; r < world; ++r) {
      if (work[r] == nullptr) continue;
      const StepWork& w = *work[r];
      ApplyCopyOpsOnHost(sched[r].ops.data() + w.unpack_begin,
                         w.unpack_end - w.unpack_begin, nullptr,
                         dst_bases[r].data(), recv[r].data(), nullptr);
    }
  }
  return dst;
}

struct Case {
  const char* from;
  const char* to;
  int world;
  int64_t bucket_bytes;
};

class ScheduleSimulationTest
    : public ::testing::TestWithParam<std::tuple<Case, WireFormat>> {};

TEST_P(ScheduleSimulationTest, DestinationsComeOutExact) {
  const Case c = std::get<0>(GetParam());
  const WireFormat wire = std::get<1>(GetParam());
  const ModelSpec spec = nccl_test::SmallModel();
  auto plan = nccl_test::MakePlan(spec, c.from, c.to, c.world, c.bucket_bytes);
  ASSERT_NE(plan, nullptr);
  const auto globals = nccl_test::RandomGlobals(spec, 11);
  std::vector<std::vector<Bytes>> src;
  for (int r = 0; r < c.world; ++r) {
    src.push_back(
        nccl_test::Shards(spec, plan->src, r, globals, WireFormat::kRaw));
  }
  const auto dst = Simulate(*plan, wire, src);
  ASSERT_EQ(static_cast<int>(dst.size()), c.world);
  for (int r = 0; r < c.world; ++r) {
    const auto want = nccl_test::Shards(spec, plan->dst, r, globals, wire);
    for (size_t t = 0; t < want.size(); ++t) {
      EXPECT_TRUE(dst[r][t] == want[t])
          << c.from << " -> " << c.to << " rank " << r << " tensor "
          << spec.tensors[t].meta.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ScheduleSimulationTest,
    ::testing::Combine(
        ::testing::Values(Case{"dp=1", "dp=1", 1, 1 << 20},
                          Case{"tp=2,dp=2", "fsdp=4", 4, 256},
                          Case{"fsdp=4", "tp=2,dp=2", 4, 1000},
                          Case{"tp=2,pp=2", "tp=4", 4, 512},
                          Case{"tp=2,pp=2,dp=2", "tp=4,dp=2", 8, 300},
                          Case{"fsdp=8", "tp=2,fsdp=4", 8, 1 << 20}),
        ::testing::Values(WireFormat::kRaw, WireFormat::kBf16)),
    [](const ::testing::TestParamInfo<std::tuple<Case, WireFormat>>& info) {
      std::string name = std::string(std::get<0>(info.param).from) + "_to_" +
                         std::get<0>(info.param).to + "_" +
                         WireFormatName(std::get<1>(info.param));
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

TEST(ScheduleTest, SelfSendsInStepsWork) {
  const ModelSpec spec = nccl_test::SmallModel();
  auto local = nccl_test::MakePlan(spec, "dp=1", "dp=1", 1, 1 << 20);
  ASSERT_NE(local, nullptr);
  ASSERT_FALSE(local->local.empty());
  auto plan =
      std::make_shared<const TransferPlan>(LocalCopiesAsSteps(*local, 3));
  EXPECT_TRUE(plan->local.empty());
  EXPECT_EQ(plan->stats.local_bytes, 0);
  EXPECT_EQ(plan->stats.same_node_bytes, local->stats.local_bytes);
  EXPECT_EQ(plan->stats.max_send_bytes, local->stats.local_bytes);
  EXPECT_GE(plan->stats.peak_staging_bytes, 2 * local->stats.local_bytes / 3);
  const auto globals = nccl_test::RandomGlobals(spec, 5);
  for (WireFormat wire : {WireFormat::kRaw, WireFormat::kBf16}) {
    auto s = BuildSchedule(*plan, 0, wire);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->local_end, 0);
    ASSERT_EQ(s->steps.size(), 3u);
    for (const StepWork& w : s->steps) {
      ASSERT_EQ(w.sends.size(), 1u);
      EXPECT_EQ(w.sends[0].peer, 0);
      EXPECT_EQ(w.sends[0].bytes, w.recv_bytes);
    }
    const auto dst = Simulate(
        *plan, wire,
        {nccl_test::Shards(spec, plan->src, 0, globals, WireFormat::kRaw)});
    ASSERT_EQ(dst.size(), 1u);
    EXPECT_TRUE(dst[0] == nccl_test::Shards(spec, plan->dst, 0, globals, wire));
  }
}

TEST(ScheduleTest, BucketRunsAreAlignedAndPiecesBounded) {
  const ModelSpec spec = nccl_test::SmallModel();
  auto plan = nccl_test::MakePlan(spec, "tp=2,dp=2", "fsdp=4", 4, 700);
  ASSERT_NE(plan, nullptr);
  for (int r = 0; r < 4; ++r) {
    auto s = BuildSchedule(*plan, r, WireFormat::kBf16);
    ASSERT_TRUE(s.ok()) << s.status();
    for (const CopyOp& op : s->ops) {
      if (op.dst_slot == kBucketSlot) {
        EXPECT_EQ(op.dst_offset % kBucketAlign, 0);
      }
      if (op.src_slot == kBucketSlot) {
        EXPECT_EQ(op.src_offset % kBucketAlign, 0);
      }
      const int64_t src_bytes =
          op.kind == CopyKind::kCastF32ToBf16 ? op.count * 4 : op.count;
      EXPECT_GT(op.count, 0);
      EXPECT_LE(src_bytes, kPieceBytes);
    }
    int64_t sent = 0;
    for (const StepWork& w : s->steps) sent += w.send_bytes;
    EXPECT_EQ(sent, s->wire_bytes_sent);
    EXPECT_GE(sent, s->same_node_bytes + s->cross_node_bytes);
  }
}

TEST(ScheduleTest, LongRunsSplitIntoPieces) {
  std::vector<CopyOp> ops;
  AppendCopy(3, 4, kBucketSlot, 16, 10000, 4, /*cast=*/true, &ops);
  ASSERT_EQ(ops.size(), 5u);  // 2048 f32 per piece.
  int64_t total = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i].src_offset, 4 + 2048 * 4 * static_cast<int64_t>(i));
    EXPECT_EQ(ops[i].dst_offset, 16 + 2048 * 2 * static_cast<int64_t>(i));
    total += ops[i].count;
  }
  EXPECT_EQ(total, 10000);
  ops.clear();
  AppendCopy(kBucketSlot, 0, 1, 2, 8193, 1, /*cast=*/false, &ops);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[1].count, 1);
  ops.clear();
  AppendCopy(0, 0, 1, 0, 0, 8, false, &ops);
  EXPECT_TRUE(ops.empty());
}

TEST(ScheduleTest, RejectsTransfersOutsideShards) {
  const ModelSpec spec = nccl_test::SmallModel();
  auto good = nccl_test::MakePlan(spec, "tp=2,dp=2", "fsdp=4", 4, 256);
  ASSERT_NE(good, nullptr);
  ASSERT_FALSE(good->steps.empty());
  {
    TransferPlan bad = *good;
    Transfer& x = bad.steps[0].transfers[0];
    x.length = bad.src.Get(x.src_rank, x.tensor).num_elements + 1;
    auto s = BuildSchedule(bad, x.src_rank, WireFormat::kRaw);
    EXPECT_TRUE(s.status().IsInvalidArgument()) << s.status();
  }
  {
    TransferPlan bad = *good;
    bad.steps[0].transfers[0].tensor = 99;
    auto s = BuildSchedule(bad, bad.steps[0].transfers[0].src_rank,
                           WireFormat::kRaw);
    EXPECT_TRUE(s.status().IsInvalidArgument()) << s.status();
  }
  EXPECT_TRUE(
      BuildSchedule(*good, 4, WireFormat::kRaw).status().IsInvalidArgument());
}

}  // namespace
}  // namespace hy::reshard::nccl_internal
