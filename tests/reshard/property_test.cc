// Property test: random model specs, random pairs of layouts over world
// sizes 1..8, random contents of every dtype; after a reshard every rank's
// shard equals, bitwise, the slice of the global tensor its layout says.

#include <gtest/gtest.h>

#include <random>

#include "hy/reshard/executor.h"
#include "hy/reshard/plan.h"
#include "reshard_test_util.h"

namespace hy::reshard {
namespace {

using testing::CutShards;
using testing::MakeTensor;
using testing::RandomGlobals;

const DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kF64,
                         DType::kI64, DType::kI32,  DType::kI8,  DType::kU8,
                         DType::kBool};

ModelSpec RandomSpec(std::mt19937_64& rng, int layers) {
  ModelSpec spec;
  std::uniform_int_distribution<int> pick_dtype(0, std::size(kDTypes) - 1);
  std::uniform_int_distribution<int> n_tensors(1, 4);
  // Dimensions multiples of 840 / small: multiples of 8 (tp | 8) times 1..3,
  // plus the odd replicated tensor of any size.
  auto dim = [&] { return int64_t{8} * std::uniform_int_distribution<int>(1, 3)(rng); };
  auto add = [&](const std::string& name, StageRule::Kind kind, int layer) {
    DType dtype = kDTypes[pick_dtype(rng)];
    int shape_kind = static_cast<int>(rng() % 5);
    if (shape_kind == 0) {  // Replicated vector of odd length.
      spec.tensors.push_back(MakeTensor(name, dtype,
                                        {1 + static_cast<int64_t>(rng() % 13)},
                                        -1, kind, layer));
    } else if (shape_kind == 1) {  // 3-d, split on dim 0.
      spec.tensors.push_back(
          MakeTensor(name, dtype, {dim(), 3, 5}, 0, kind, layer));
    } else {
      int tp_dim = static_cast<int>(rng() % 2);
      spec.tensors.push_back(
          MakeTensor(name, dtype, {dim(), dim()}, tp_dim, kind, layer));
    }
  };
  add("embed", StageRule::Kind::kFirst, 0);
  for (int l = 0; l < layers; ++l) {
    int n = n_tensors(rng);
    for (int k = 0; k < n; ++k) {
      add("layers." + std::to_string(l) + ".t" + std::to_string(k),
          StageRule::Kind::kLayer, l);
    }
  }
  if (rng() % 2) add("shared", StageRule::Kind::kAll, 0);
  add("head", StageRule::Kind::kLast, 0);
  return spec;
}

// A random layout of exactly `world` ranks with pp <= layers.
Layout RandomLayout(std::mt19937_64& rng, int world, int layers) {
  while (true) {
    int sizes[4] = {1, 1, 1, 1};  // tp, pp, dp, fsdp
    int left = world;
    for (int p : {2, 3, 5, 7}) {
      while (left % p == 0) {
        sizes[rng() % 4] *= p;
        left /= p;
      }
    }
    if (8 % sizes[0] != 0 || sizes[1] > layers) continue;
    std::string text = "tp=" + std::to_string(sizes[0]) +
                       ",pp=" + std::to_string(sizes[1]) +
                       ",dp=" + std::to_string(sizes[2]) +
                       ",fsdp=" + std::to_string(sizes[3]);
    auto layout = Layout::Parse(text);
    if (layout.ok()) return *layout;
  }
}

TEST(ReshardPropertyTest, EveryRankGetsItsSliceBitwise) {
  std::mt19937_64 rng(20261122);
  int pairs = 0;
  int moved = 0;  // Pairs that crossed the network (not all local).
  for (int iter = 0; iter < 320; ++iter) {
    const int world = 1 + static_cast<int>(rng() % 8);
    const int layers = 1 + static_cast<int>(rng() % 4);
    ModelSpec spec = RandomSpec(rng, layers);
    Layout src = RandomLayout(rng, world, layers);
    Layout dst = RandomLayout(rng, world, layers);
    const WireFormat wire = rng() % 3 == 0 ? WireFormat::kBf16 : WireFormat::kRaw;
    PlanOptions options;
    options.bucket_bytes = rng() % 2 ? (int64_t{64} << 20) : 64 + rng() % 512;
    Topology topo{world, 1 + static_cast<int>(rng() % 4)};
    SCOPED_TRACE("iter " + std::to_string(iter) + ": " + src.ToString() +
                 " -> " + dst.ToString() + " wire " + WireFormatName(wire) +
                 " bucket " + std::to_string(options.bucket_bytes));
    auto plan = Plan(src, dst, spec, topo, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto globals = RandomGlobals(spec, rng);
    auto src_bufs = CutShards(plan->src, spec, globals);
    auto want = CutShards(plan->dst, spec, globals, wire);
    std::vector<std::vector<std::vector<uint8_t>>> got(world);
    std::vector<std::vector<ConstBytes>> src_views(world);
    std::vector<std::vector<MutableBytes>> dst_views(world);
    for (int r = 0; r < world; ++r) {
      for (size_t t = 0; t < spec.tensors.size(); ++t) {
        got[r].emplace_back(want[r][t].size(), 0xEE);
        src_views[r].emplace_back(src_bufs[r][t].data(), src_bufs[r][t].size());
      }
      for (auto& g : got[r]) dst_views[r].emplace_back(g.data(), g.size());
    }
    if (plan->stats.network_bytes() > 0) ++moved;
    auto shared = std::make_shared<const TransferPlan>(std::move(*plan));
    ExecutorOptions exec;
    exec.wire = wire;
    ReshardStats stats;
    ASSERT_TRUE(ReshardInProcess(shared, src_views, dst_views, exec, &stats).ok());
    for (int r = 0; r < world; ++r) {
      for (size_t t = 0; t < spec.tensors.size(); ++t) {
        ASSERT_EQ(got[r][t], want[r][t])
            << "rank " << r << " tensor " << spec.tensors[t].meta.name;
      }
    }
    ++pairs;
  }
  EXPECT_EQ(pairs, 320);
  EXPECT_GT(moved, 100);
}

}  // namespace
}  // namespace hy::reshard
