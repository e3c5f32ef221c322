// The executor's learned link speed (ExecutorOptions::learn_link_speed):
// after a run it takes the speed its own exchanges reached, and sparse delta
// then scans for changes only where the link is slower than that scan. Over
// a link slowed to 2 MB/s the changes of 5% of the values go as a delta;
// over the in-process transport (memory speed) the same change goes whole,
// without a scan. Both deliver the same bits.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "hy/reshard/executor.h"
#include "hy/reshard/plan.h"
#include "reshard_test_util.h"

namespace hy::reshard {
namespace {

using testing::CutShards;
using testing::RandomGlobals;
using testing::TinyLlama;

// A transport that moves bytes at `bytes_per_second` (0: as fast as the one
// it wraps): after each exchange it sleeps for what this rank sent or
// received, whichever is more, at that rate.
class ShapedTransport : public Transport {
 public:
  ShapedTransport(std::unique_ptr<Transport> inner, double bytes_per_second)
      : inner_(std::move(inner)), rate_(bytes_per_second) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  const char* name() const override { return "local"; }
  Status AllToAllV(const std::vector<ConstBytes>& send,
                   std::vector<std::vector<uint8_t>>* recv) override {
    HY_RETURN_IF_ERROR(inner_->AllToAllV(send, recv));
    size_t sent = 0, received = 0;
    for (const auto& s : send) sent += s.size();
    for (const auto& r : *recv) received += r.size();
    if (rate_ > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(
          static_cast<double>(std::max(sent, received)) / rate_));
    }
    return Status::OK();
  }
  Status AllGatherV(ConstBytes in,
                    std::vector<std::vector<uint8_t>>* out) override {
    return inner_->AllGatherV(in, out);
  }
  Status Barrier() override { return inner_->Barrier(); }

 private:
  std::unique_ptr<Transport> inner_;
  double rate_;
};

// Runs `plan` on every rank (threads), `runs` source sets in turn, with one
// executor per rank across runs; returns each run's merged stats and
// checks every destination against the shards cut from that run's values.
std::vector<ReshardStats> RunSeries(
    std::shared_ptr<const TransferPlan> plan, const ExecutorOptions& options,
    double link_bytes_per_second,
    const std::vector<std::vector<std::vector<uint8_t>>>& values) {
  const ModelSpec& spec = plan->spec;
  const int world = plan->topology.world_size;
  InProcessHub hub(world, 60000);
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::unique_ptr<Executor>> executors;
  for (int r = 0; r < world; ++r) {
    transports.push_back(std::make_unique<ShapedTransport>(
        hub.Connect(r), link_bytes_per_second));
    executors.push_back(
        std::make_unique<Executor>(plan, transports.back().get(), options));
  }
  std::vector<ReshardStats> out;
  // The destinations live across runs: a delta applies to what they hold.
  std::vector<std::vector<std::vector<uint8_t>>> dst(world);
  for (const auto& globals : values) {
    const auto src = CutShards(plan->src, spec, globals);
    const auto want = CutShards(plan->dst, spec, globals, options.wire);
    std::vector<Status> status(world);
    std::vector<ReshardStats> stats(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      if (dst[r].empty()) {
        for (const auto& w : want[r]) dst[r].emplace_back(w.size());
      }
      threads.emplace_back([&, r] {
        std::vector<ConstBytes> in;
        std::vector<MutableBytes> outs;
        for (const auto& b : src[r]) in.emplace_back(b.data(), b.size());
        for (auto& b : dst[r]) outs.emplace_back(b.data(), b.size());
        status[r] = executors[r]->Run(in, outs, &stats[r]);
      });
    }
    for (auto& t : threads) t.join();
    ReshardStats merged;
    for (int r = 0; r < world; ++r) {
      EXPECT_TRUE(status[r].ok()) << status[r];
      EXPECT_TRUE(dst[r] == want[r]) << "rank " << r;
      merged.Merge(stats[r]);
    }
    out.push_back(merged);
  }
  return out;
}

TEST(LinkSpeedTest, ASlowLinkGetsADeltaAFastOneTheFullForm) {
  const ModelSpec spec = TinyLlama(2, 256, 2048);
  auto planned = Plan(*Layout::Parse("fsdp=4"), *Layout::Parse("tp=2,dp=2"),
                      spec, Topology{4, 2}, PlanOptions{int64_t{8} << 20});
  ASSERT_TRUE(planned.ok()) << planned.status();
  auto plan = std::make_shared<const TransferPlan>(std::move(*planned));
  std::mt19937_64 rng(3);
  std::vector<std::vector<std::vector<uint8_t>>> values = {
      RandomGlobals(spec, rng)};
  values.push_back(values[0]);
  std::uniform_real_distribution<double> u(0, 1);
  for (auto& g : values[1]) {  // 5% of the values change their bf16.
    float* f = reinterpret_cast<float*>(g.data());
    for (size_t i = 0; i < g.size() / 4; ++i) {
      if (u(rng) < 0.05) f[i] = f[i] * 1.5f + 0.01f;
    }
  }
  ExecutorOptions options;
  options.wire = WireFormat::kBf16;
  options.sparse_delta = true;
  options.learn_link_speed = true;
  // Fixed, so the choice does not depend on this machine's load; the
  // in-process exchange runs at memory speed (more than 35 MB/s even on a
  // busy 2-core machine, first run included).
  options.scan_bytes_per_second = 10e6;

  const auto slow = RunSeries(plan, options, 2e6, values);
  const auto fast = RunSeries(plan, options, 0, values);
  const int64_t full_bytes = slow[0].wire_bytes_sent;
  ASSERT_GT(full_bytes, 4 << 20);
  // The first run is the full form everywhere and measures the link.
  EXPECT_EQ(fast[0].wire_bytes_sent, full_bytes);
  EXPECT_LT(slow[0].link_bytes_per_second, 3e6);
  EXPECT_GT(fast[0].link_bytes_per_second, 10e6);
  // Then: a delta over the slow link, the full form over the fast one.
  EXPECT_EQ(slow[1].buckets_full_by_cost, 0);
  EXPECT_LT(slow[1].wire_bytes_sent * 4, full_bytes);
  EXPECT_GT(fast[1].buckets_full_by_cost, 0);
  EXPECT_EQ(fast[1].changed_elements_sent, 0);  // Nothing was scanned.
  EXPECT_GE(fast[1].wire_bytes_sent, full_bytes);
}

// A constant link speed (learn_link_speed off) scans every bucket, as
// before: the choice stays the bytes' alone.
TEST(LinkSpeedTest, AConstantLinkAlwaysScans) {
  const ModelSpec spec = TinyLlama(1, 64, 256);
  auto planned = Plan(*Layout::Parse("fsdp=2"), *Layout::Parse("tp=2"), spec,
                      Topology{2, 2}, PlanOptions{int64_t{1} << 20});
  ASSERT_TRUE(planned.ok());
  auto plan = std::make_shared<const TransferPlan>(std::move(*planned));
  std::mt19937_64 rng(5);
  const auto globals = RandomGlobals(spec, rng);
  ExecutorOptions options;
  options.wire = WireFormat::kBf16;
  options.sparse_delta = true;
  options.link_bytes_per_second = 1e15;
  options.scan_bytes_per_second = 1e6;
  const auto stats = RunSeries(plan, options, 0, {globals, globals});
  EXPECT_EQ(stats[1].buckets_full_by_cost, 0);
  EXPECT_LT(stats[1].wire_bytes_sent * 10, stats[0].wire_bytes_sent);
}

}  // namespace
}  // namespace hy::reshard
