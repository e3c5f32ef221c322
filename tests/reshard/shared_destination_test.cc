// RunToSharedDestination: every rank of an FSDP layout writes its own
// pieces into one destination holding whole tensors (the vLLM engines'
// shared weight file), cast to bf16 or copied as f32.

#include "hy/reshard/shared_destination.h"

#include <gtest/gtest.h>

#include <random>

#include "reshard_test_util.h"

namespace hy::reshard {
namespace {

using testing::CutShards;
using testing::RandomGlobals;
using testing::TinyLlama;

struct Case {
  int world;
  DType dtype;
};

class SharedDestinationTest : public ::testing::TestWithParam<Case> {};

TEST_P(SharedDestinationTest, EveryRankWritesItsPiecesAndTheWholeArrives) {
  const Case c = GetParam();
  const ModelSpec spec = TinyLlama(2, 16, 40);
  std::mt19937_64 rng(7);
  const auto globals = RandomGlobals(spec, rng);
  Layout train = Layout::Make(1, 1, 1, c.world).value();
  Layout whole = Layout::Make(1, 1, 1, 1).value();
  Topology topo;
  topo.world_size = c.world;
  topo.ranks_per_node = c.world;
  TransferPlan plan = Plan(train, whole, spec, topo).value();
  const auto shards = CutShards(ShardMap::Build(train, spec).value(), spec,
                                globals);
  const size_t width = c.dtype == DType::kF32 ? 4 : 2;
  std::vector<std::vector<uint8_t>> dst(spec.tensors.size());
  std::vector<MutableBytes> out;
  for (size_t t = 0; t < dst.size(); ++t) {
    dst[t].assign(globals[t].size() / 4 * width, 0xEE);
    out.emplace_back(dst[t].data(), dst[t].size());
  }
  int64_t written = 0;
  for (int r = 0; r < c.world; ++r) {
    std::vector<ConstBytes> src;
    for (const auto& s : shards[r]) src.emplace_back(s.data(), s.size());
    SharedDestinationStats st;
    ASSERT_TRUE(RunToSharedDestination(plan, r, 0, src, out, c.dtype, &st).ok());
    written += st.bytes_written;
  }
  int64_t total = 0;
  for (size_t t = 0; t < dst.size(); ++t) {
    const auto& g = globals[t];
    std::vector<uint8_t> want = g;
    if (c.dtype == DType::kBF16) {
      want.assign(g.size() / 2, 0);
      CastF32ToBf16(g.data(), want.data(), g.size() / 4);
    }
    EXPECT_EQ(dst[t], want) << spec.tensors[t].meta.name;
    total += static_cast<int64_t>(want.size());
  }
  EXPECT_EQ(written, total);  // Each element once, by its owner.
}

INSTANTIATE_TEST_SUITE_P(Worlds, SharedDestinationTest,
                         ::testing::Values(Case{1, DType::kBF16},
                                           Case{2, DType::kBF16},
                                           Case{3, DType::kF32},
                                           Case{4, DType::kBF16}));

TEST(SharedDestinationErrorsTest, BadBuffersAreRefusedBeforeAnyWrite) {
  const ModelSpec spec = TinyLlama(1);
  Layout train = Layout::Make(1, 1, 1, 2).value();
  Layout whole = Layout::Make(1, 1, 1, 1).value();
  Topology topo;
  topo.world_size = 2;
  topo.ranks_per_node = 2;
  TransferPlan plan = Plan(train, whole, spec, topo).value();
  std::vector<std::vector<uint8_t>> bufs(spec.tensors.size());
  std::vector<ConstBytes> src;
  std::vector<MutableBytes> dst;
  for (size_t t = 0; t < bufs.size(); ++t) {
    bufs[t].assign(spec.tensors[t].meta.NumElements().value() * 4, 0);
    src.emplace_back(bufs[t].data(), bufs[t].size());
    dst.emplace_back(bufs[t].data(), 1);  // Far too small.
  }
  std::vector<uint8_t> before = bufs[0];
  Status s = RunToSharedDestination(plan, 0, 0, src, dst, DType::kBF16);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bufs[0], before);
  EXPECT_EQ(RunToSharedDestination(plan, 0, 0, src, dst, DType::kF16).code(),
            StatusCode::kInvalidArgument);
  src.pop_back();
  EXPECT_EQ(RunToSharedDestination(plan, 0, 0, src, dst, DType::kBF16).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hy::reshard
