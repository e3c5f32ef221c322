#include "hy/reshard/executor.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "hy/metrics/hy_metrics.h"
#include "hy/reshard/plan.h"
#include "hy/reshard/shared_destination.h"
#include "reshard_test_util.h"

namespace hy::reshard {
namespace {

using testing::CutShards;
using testing::RandomGlobals;
using testing::TinyLlama;

Layout L(const std::string& text) { return *Layout::Parse(text); }

// world ranks as threads, each with an Executor that lives across runs (so
// sparse delta has state), over one InProcessHub.
class Group {
 public:
  Group(std::shared_ptr<const TransferPlan> plan, ExecutorOptions options)
      : plan_(plan), hub_(plan->topology.world_size, 20000) {
    for (int r = 0; r < plan->topology.world_size; ++r) {
      transports_.push_back(hub_.Connect(r));
      executors_.push_back(
          std::make_unique<Executor>(plan, transports_.back().get(), options));
      dst_.emplace_back();
      for (int t = 0; t < plan->src.num_tensors(); ++t) {
        DType d = WireDType(plan->spec.tensors[t].meta.dtype, options.wire);
        const int64_t n = r < plan->dst.world_size()
                              ? plan->dst.Get(r, t).num_elements
                              : 0;  // Beyond the destination's world.
        dst_[r].emplace_back(n * DTypeSize(d));
      }
    }
  }

  // Runs every rank on the given source shards; returns the first error.
  Status Run(const std::vector<std::vector<std::vector<uint8_t>>>& src,
             ReshardStats* merged) {
    const int world = plan_->topology.world_size;
    std::vector<Status> status(world);
    std::vector<ReshardStats> stats(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        std::vector<ConstBytes> in;
        std::vector<MutableBytes> out;
        for (const auto& b : src[r]) in.emplace_back(b.data(), b.size());
        for (auto& b : dst_[r]) out.emplace_back(b.data(), b.size());
        status[r] = executors_[r]->Run(in, out, &stats[r]);
      });
    }
    for (auto& t : threads) t.join();
    *merged = ReshardStats();
    for (int r = 0; r < world; ++r) merged->Merge(stats[r]);
    for (const Status& s : status) {
      if (!s.ok()) return s;
    }
    return Status::OK();
  }

  std::vector<std::vector<std::vector<uint8_t>>>& dst() { return dst_; }
  Executor& executor(int rank) { return *executors_[rank]; }

 private:
  std::shared_ptr<const TransferPlan> plan_;
  InProcessHub hub_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<std::unique_ptr<Executor>> executors_;
  std::vector<std::vector<std::vector<uint8_t>>> dst_;
};

std::shared_ptr<const TransferPlan> MakePlan(const ModelSpec& spec,
                                             const char* from, const char* to,
                                             int world) {
  auto plan = Plan(L(from), L(to), spec, Topology{world, 2},
                   PlanOptions{int64_t{1} << 14});
  EXPECT_TRUE(plan.ok()) << plan.status();
  return std::make_shared<const TransferPlan>(std::move(*plan));
}

// Changes `fraction` of the f32 values of every tensor by enough to change
// their bf16 rounding.
void Perturb(std::vector<std::vector<uint8_t>>* globals, double fraction,
             std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  for (auto& g : *globals) {
    float* f = reinterpret_cast<float*>(g.data());
    for (size_t i = 0; i < g.size() / 4; ++i) {
      if (u(rng) < fraction) f[i] = f[i] * 1.5f + 0.01f;
    }
  }
}

TEST(ExecutorTest, SparseDeltaIsBitIdenticalAndMovesProportionallyLess) {
  ModelSpec spec = TinyLlama(4, 64, 256);
  auto plan = MakePlan(spec, "fsdp=4", "tp=2,dp=2", 4);
  std::mt19937_64 rng(7);
  auto globals = RandomGlobals(spec, rng);
  ExecutorOptions full_opts, delta_opts;
  full_opts.wire = delta_opts.wire = WireFormat::kBf16;
  delta_opts.sparse_delta = true;
  Group full(plan, full_opts), delta(plan, delta_opts);
  ReshardStats fs, ds;
  auto src = CutShards(plan->src, spec, globals);
  ASSERT_TRUE(full.Run(src, &fs).ok());
  ASSERT_TRUE(delta.Run(src, &ds).ok());  // First run: everything.
  EXPECT_EQ(full.dst(), delta.dst());
  // Each sender's buckets to the two dp replicas of a tp shard are one.
  EXPECT_GT(fs.buckets_shared, 0);
  EXPECT_EQ(ds.buckets_shared, fs.buckets_shared);
  const int64_t full_bytes = fs.wire_bytes_sent;
  EXPECT_GE(ds.wire_bytes_sent, full_bytes);  // Full buckets, same size.

  // Unchanged: nearly nothing crosses.
  ASSERT_TRUE(delta.Run(src, &ds).ok());
  EXPECT_EQ(ds.changed_elements_sent, 0);
  EXPECT_LT(ds.wire_bytes_sent * 100, full_bytes);
  EXPECT_EQ(delta.dst(), full.dst());

  int64_t previous = 0;
  for (double fraction : {0.01, 0.10, 1.0}) {
    Perturb(&globals, fraction, rng);
    src = CutShards(plan->src, spec, globals);
    ASSERT_TRUE(full.Run(src, &fs).ok());
    ASSERT_TRUE(delta.Run(src, &ds).ok()) << fraction;
    EXPECT_EQ(delta.dst(), full.dst()) << fraction;
    EXPECT_EQ(full.dst(),
              CutShards(plan->dst, spec, globals, WireFormat::kBf16));
    EXPECT_GT(ds.wire_bytes_sent, previous) << fraction;
    previous = ds.wire_bytes_sent;
    if (fraction == 0.01) {
      EXPECT_LT(ds.wire_bytes_sent * 10, full_bytes);
    } else if (fraction == 0.10) {
      EXPECT_LT(ds.wire_bytes_sent * 2, full_bytes);
    } else {  // Never more than the full form (plus bucket headers).
      EXPECT_LE(ds.wire_bytes_sent, full_bytes + 64 * ds.steps * 4);
    }
  }
  // After buckets that went whole, the sender's copy is what they carried:
  // a sparse round after them is still bit-identical.
  Perturb(&globals, 0.02, rng);
  src = CutShards(plan->src, spec, globals);
  ASSERT_TRUE(full.Run(src, &fs).ok());
  ASSERT_TRUE(delta.Run(src, &ds).ok());
  EXPECT_EQ(delta.dst(), full.dst());
  EXPECT_LT(ds.wire_bytes_sent * 5, full_bytes);
}

// Park writes the buckets (the copies deltas are taken against) out to a
// file and frees them: the next run reads them back and still sends a
// delta, bit-identical. A park that cannot write costs the delta state
// only: the next run sends everything, with the same result.
TEST(ExecutorTest, ParkedBucketsComeBackAndTheDeltaGoesOn) {
  ModelSpec spec = TinyLlama(4, 64, 256);
  auto plan = MakePlan(spec, "fsdp=4", "tp=2,dp=2", 4);
  std::mt19937_64 rng(9);
  auto globals = RandomGlobals(spec, rng);
  ExecutorOptions full_opts, delta_opts;
  full_opts.wire = delta_opts.wire = WireFormat::kBf16;
  delta_opts.sparse_delta = true;
  Group full(plan, full_opts), delta(plan, delta_opts);
  ReshardStats fs, ds;
  auto src = CutShards(plan->src, spec, globals);
  ASSERT_TRUE(full.Run(src, &fs).ok());
  ASSERT_TRUE(delta.Run(src, &ds).ok());
  const int64_t full_bytes = fs.wire_bytes_sent;
  const std::string dir = ::testing::TempDir() + "hy_park_" +
                          std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  for (int round = 0; round < 2; ++round) {
    for (int r = 0; r < 4; ++r) {
      ASSERT_TRUE(delta.executor(r).Park(dir).ok());
      ASSERT_TRUE(delta.executor(r).Park(dir).ok());  // Twice: once.
    }
    EXPECT_TRUE(std::filesystem::is_empty(dir));  // Unlinked at once.
    Perturb(&globals, 0.01, rng);
    src = CutShards(plan->src, spec, globals);
    ASSERT_TRUE(full.Run(src, &fs).ok());
    ASSERT_TRUE(delta.Run(src, &ds).ok()) << round;
    EXPECT_EQ(delta.dst(), full.dst()) << round;
    EXPECT_GT(ds.changed_elements_sent, 0);
    EXPECT_LT(ds.wire_bytes_sent * 10, full_bytes) << round;
  }
  std::filesystem::remove_all(dir);

  Status s = delta.executor(2).Park("/nonexistent/hy/park");
  EXPECT_EQ(s.code(), StatusCode::kIOError) << s;
  EXPECT_NE(s.message().find("/nonexistent/hy/park"), std::string::npos) << s;
  Perturb(&globals, 0.01, rng);
  src = CutShards(plan->src, spec, globals);
  ASSERT_TRUE(full.Run(src, &fs).ok());
  ASSERT_TRUE(delta.Run(src, &ds).ok());
  EXPECT_EQ(delta.dst(), full.dst());
  EXPECT_EQ(full.dst(), CutShards(plan->dst, spec, globals, WireFormat::kBf16));
  // Rank 2 sent its buckets whole (about a quarter of the full bytes), the
  // others deltas (under a tenth in all, as above).
  EXPECT_GT(ds.wire_bytes_sent * 6, full_bytes);
  EXPECT_LT(ds.wire_bytes_sent * 2, full_bytes);
}

TEST(ExecutorTest, DeltaAgainstTheWrongPreviousCopyIsDataLossThenFull) {
  ModelSpec spec = TinyLlama(2, 32, 64);
  auto plan = MakePlan(spec, "fsdp=4", "tp=2,dp=2", 4);
  std::mt19937_64 rng(8);
  auto globals = RandomGlobals(spec, rng);
  ExecutorOptions opts;
  opts.wire = WireFormat::kBf16;
  opts.sparse_delta = true;
  Group group(plan, opts);
  ReshardStats st;
  auto src = CutShards(plan->src, spec, globals);
  ASSERT_TRUE(group.Run(src, &st).ok());
  // A receiver's copy changes behind the executor's back.
  for (auto& t : group.dst()[1]) {
    for (auto& b : t) b ^= 0x5A;
  }
  Perturb(&globals, 0.05, rng);
  Status s = group.Run(CutShards(plan->src, spec, globals), &st);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.IsDataLoss()) << s;
  EXPECT_NE(s.message().find("previous copy"), std::string::npos) << s;
  // What the trainer's weight sync then does (rollout.vllm.delta): every
  // rank forgets its delta state and sends everything, which lands
  // exactly; the run after that is a delta again.
  for (int r = 0; r < 4; ++r) group.executor(r).ResetDelta();
  ASSERT_TRUE(group.Run(CutShards(plan->src, spec, globals), &st).ok());
  EXPECT_EQ(group.dst(),
            CutShards(plan->dst, spec, globals, WireFormat::kBf16));
  const int64_t full_bytes = st.wire_bytes_sent;
  Perturb(&globals, 0.01, rng);
  ASSERT_TRUE(group.Run(CutShards(plan->src, spec, globals), &st).ok());
  EXPECT_EQ(group.dst(),
            CutShards(plan->dst, spec, globals, WireFormat::kBf16));
  EXPECT_LT(st.wire_bytes_sent * 4, full_bytes);
}

TEST(ExecutorTest, WrongBuffersAreRejectedBeforeAnythingMoves) {
  ModelSpec spec = TinyLlama(1);
  auto plan = MakePlan(spec, "fsdp=2", "tp=2", 2);
  InProcessHub hub(2, 1000);
  auto t0 = hub.Connect(0);
  Executor ex(plan, t0.get(), ExecutorOptions());
  std::vector<ConstBytes> src(spec.tensors.size());
  std::vector<MutableBytes> dst(spec.tensors.size());
  Status s = ex.Run(src, dst, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s;
  EXPECT_NE(s.message().find("buffers of"), std::string::npos) << s;
  s = ex.Run({}, {}, nullptr);
  EXPECT_TRUE(s.IsInvalidArgument()) << s;
  // A transport of another world size.
  InProcessHub three(3, 1000);
  auto t3 = three.Connect(0);
  Executor wrong(plan, t3.get(), ExecutorOptions());
  s = wrong.Run(src, dst, nullptr);
  EXPECT_NE(s.message().find("world size mismatch"), std::string::npos) << s;
  // A plan whose world is larger than the transport's is refused too.
  auto grow = MakePlan(spec, "fsdp=2", "tp=2,dp=2", 4);
  Executor growing(grow, t3.get(), ExecutorOptions());
  s = growing.Run(src, dst, nullptr);
  EXPECT_NE(s.message().find("world size mismatch"), std::string::npos) << s;
}

// fsdp=4 gathered onto one rank's whole copy (an engine's weight file),
// run in the 4-rank world: rank 0 ends with every tensor whole, bit for
// bit. Then the same destination reached two ways at once, as across
// hosts: ranks 0 and 1 write their own pieces into it directly
// (RunToSharedDestination), ranks 2 and 3 send theirs over the transport
// (PlanFromRanks): the same bytes as the gather, f32 and bf16.
TEST(ExecutorTest, GatherOntoOneRankAndSplitByWhoCanWriteTheDestination) {
  ModelSpec spec = TinyLlama(2, 64, 256);
  auto plan = MakePlan(spec, "fsdp=4", "fsdp=1", 4);
  ASSERT_EQ(plan->dst.world_size(), 1);
  std::mt19937_64 rng(11);
  auto globals = RandomGlobals(spec, rng);
  auto src = CutShards(plan->src, spec, globals);
  for (WireFormat wire : {WireFormat::kRaw, WireFormat::kBf16}) {
    ExecutorOptions o;
    o.wire = wire;
    Group gather(plan, o);
    ReshardStats stats;
    ASSERT_TRUE(gather.Run(src, &stats).ok());
    for (int r = 1; r < 4; ++r) {
      for (const auto& b : gather.dst()[r]) EXPECT_TRUE(b.empty());
    }
    if (wire == WireFormat::kRaw) {
      EXPECT_EQ(gather.dst()[0], globals);
    }

    const std::vector<bool> remote = {false, false, true, true};
    auto part =
        std::make_shared<const TransferPlan>(PlanFromRanks(*plan, remote));
    EXPECT_TRUE(part->local.empty());  // Rank 0's own piece is written.
    for (const Step& step : part->steps) {
      ASSERT_FALSE(step.transfers.empty());
      for (const Transfer& t : step.transfers) EXPECT_GE(t.src_rank, 2);
    }
    EXPECT_EQ(part->stats.network_bytes(),
              plan->src.RankBytes(2, spec) + plan->src.RankBytes(3, spec));
    Group split(part, o);
    ASSERT_TRUE(split.Run(src, &stats).ok());
    const DType d = wire == WireFormat::kRaw ? DType::kF32 : DType::kBF16;
    for (int r = 0; r < 2; ++r) {
      std::vector<ConstBytes> in;
      std::vector<MutableBytes> out;
      for (const auto& b : src[r]) in.emplace_back(b.data(), b.size());
      for (auto& b : split.dst()[0]) out.emplace_back(b.data(), b.size());
      ASSERT_TRUE(RunToSharedDestination(*plan, r, 0, in, out, d).ok());
    }
    EXPECT_EQ(split.dst()[0], gather.dst()[0]) << WireFormatName(wire);
  }
}

TEST(ExecutorTest, MissingRankTimesOutInsteadOfHanging) {
  ModelSpec spec = TinyLlama(1);
  auto plan = MakePlan(spec, "fsdp=2", "tp=2", 2);
  InProcessHub hub(2, 200);
  auto t0 = hub.Connect(0);
  Executor ex(plan, t0.get(), ExecutorOptions());
  std::mt19937_64 rng(1);
  auto globals = RandomGlobals(spec, rng);
  auto src = CutShards(plan->src, spec, globals);
  auto want = CutShards(plan->dst, spec, globals);
  std::vector<ConstBytes> in;
  std::vector<MutableBytes> out;
  for (auto& b : src[0]) in.emplace_back(b.data(), b.size());
  for (auto& b : want[0]) out.emplace_back(b.data(), b.size());
  Status s = ex.Run(in, out, nullptr);  // Rank 1 never comes.
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
}

TEST(ExecutorTest, Bf16WireEqualsCastingAtTheDestination) {
  ModelSpec spec = TinyLlama(2, 32, 64);
  auto plan = MakePlan(spec, "tp=2,dp=2", "fsdp=4", 4);
  std::mt19937_64 rng(9);
  auto globals = RandomGlobals(spec, rng);
  // Include the awkward values: NaN, Inf, ties, denormals.
  float* f = reinterpret_cast<float*>(globals[0].data());
  const uint32_t specials[] = {0x7FC00001u, 0x7F800000u, 0xFF800000u,
                               0x3F808000u, 0x3F818000u, 0x00000001u,
                               0x807FFFFFu, 0x7F7FFFFFu};
  for (size_t i = 0; i < std::size(specials); ++i) {
    std::memcpy(&f[i * 37], &specials[i], 4);
  }
  ExecutorOptions opts;
  opts.wire = WireFormat::kBf16;
  Group group(plan, opts);
  ReshardStats st;
  ASSERT_TRUE(group.Run(CutShards(plan->src, spec, globals), &st).ok());
  EXPECT_EQ(group.dst(),
            CutShards(plan->dst, spec, globals, WireFormat::kBf16));
  EXPECT_GT(st.same_node_bytes + st.cross_node_bytes, 0);
  EXPECT_GE(st.transfer_seconds, 0);
}

}  // namespace
}  // namespace hy::reshard

namespace hy::reshard {
namespace {

TEST(ExecutorTest, RecordsTimingAndBytesIntoMetrics) {
  metrics::Registry registry;
  auto hm = metrics::HyMetrics::Register(registry);
  ASSERT_TRUE(hm.ok()) << hm.status();
  ModelSpec spec = TinyLlama(2, 32, 64);
  auto plan = MakePlan(spec, "fsdp=4", "tp=2,dp=2", 4);
  std::mt19937_64 rng(5);
  auto globals = RandomGlobals(spec, rng);
  ExecutorOptions opts;
  opts.wire = WireFormat::kBf16;
  opts.metrics = &*hm;
  Group group(plan, opts);
  ReshardStats st;
  ASSERT_TRUE(group.Run(CutShards(plan->src, spec, globals), &st).ok());
  using metrics::ReshardBytesKind;
  using metrics::ReshardPhase;
  EXPECT_EQ(metrics::Count(*hm->reshard_phase(ReshardPhase::kTransfer)), 4u);
  EXPECT_EQ(hm->reshard_bytes(ReshardBytesKind::kLocal)->Value(),
            static_cast<double>(st.local_bytes));
  EXPECT_EQ(hm->reshard_bytes(ReshardBytesKind::kNode)->Value() +
                hm->reshard_bytes(ReshardBytesKind::kRemote)->Value(),
            static_cast<double>(st.same_node_bytes + st.cross_node_bytes));
  auto duration = hm->ReshardDuration(
      metrics::ReshardDirection::kTrainToRollout,
      metrics::ReshardTransport::kLocal, metrics::ReshardWire::kBf16);
  ASSERT_TRUE(duration.ok());
  EXPECT_EQ(metrics::Count(**duration), 4u);
  // The bytes actually sent, under the run's wire, beside the logical ones
  // (fp32 tensors sent as bf16: half the logical bytes, plus framing).
  EXPECT_EQ(hm->reshard_wire_bytes(metrics::ReshardWire::kBf16)->Value(),
            static_cast<double>(st.wire_bytes_sent));
  EXPECT_EQ(hm->reshard_wire_bytes(metrics::ReshardWire::kRaw)->Value(), 0);
  EXPECT_EQ(hm->reshard_wire_bytes(metrics::ReshardWire::kDelta)->Value(), 0);
  EXPECT_EQ(hm->reshard_logical_bytes->Value(),
            static_cast<double>(st.logical_bytes_sent));
  EXPECT_GT(st.wire_bytes_sent, 0);
  EXPECT_LT(st.wire_bytes_sent, st.logical_bytes_sent);
}

}  // namespace
}  // namespace hy::reshard
