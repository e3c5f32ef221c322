#include "hy/reshard/shard_map.h"

#include <gtest/gtest.h>

#include <map>

#include "reshard_test_util.h"

namespace hy::reshard {
namespace {

using testing::MakeTensor;
using testing::TinyLlama;

Layout L(const char* text) {
  auto l = Layout::Parse(text);
  EXPECT_TRUE(l.ok()) << l.status();
  return *l;
}

// Within every replica group (ranks sharing dp and, for "all"-stage
// tensors, pp), the shards of a tensor cover it exactly once.
void ExpectExactCoverPerReplica(const ShardMap& map, const ModelSpec& spec) {
  const Layout& layout = map.layout();
  for (int t = 0; t < map.num_tensors(); ++t) {
    std::map<std::pair<int, int>, std::vector<std::vector<FlatRun>>> groups;
    for (int r = 0; r < map.world_size(); ++r) {
      Coord c = layout.CoordOf(r);
      const RankShard& s = map.Get(r, t);
      int stage = spec.StageOf(t, layout.pp());
      if (stage != -1 && stage != c.pp) {
        EXPECT_FALSE(s.has_shard);
        continue;
      }
      // TP-replicated tensors: every tp index holds the same elements; use
      // tp index 0's group only.
      if (spec.tensors[t].tp_dim < 0 && c.tp != 0) continue;
      groups[{c.dp, c.pp}].push_back(s.runs);
      EXPECT_EQ(TotalLength(s.runs), s.num_elements);
      if (s.has_shard) {
        EXPECT_TRUE(s.geometry.Validate(spec.tensors[t].meta.shape).ok());
      }
    }
    for (auto& [key, shards] : groups) {
      EXPECT_TRUE(
          CheckExactCover(shards, spec.tensors[t].meta.NumElements().value()).ok())
          << spec.tensors[t].meta.name << " in " << layout.ToString();
    }
  }
}

TEST(ShardMapTest, CoversEveryTensorExactlyOncePerReplica) {
  ModelSpec spec = TinyLlama(4);
  for (const char* text : {"dp=1", "fsdp=4", "tp=2,dp=2", "tp=4,pp=2",
                           "tp=2,pp=2,dp=2", "tp=2,fsdp=4", "fsdp=3",
                           "tp=2,fsdp=2,dp=2", "pp=4,fsdp=2",
                           "tp=2,dp=4,order=dp:2-tp-dp"}) {
    auto map = ShardMap::Build(L(text), spec);
    ASSERT_TRUE(map.ok()) << text << ": " << map.status();
    ExpectExactCoverPerReplica(*map, spec);
  }
}

TEST(ShardMapTest, TensorParallelGivesBoxes) {
  ModelSpec spec;
  spec.tensors.push_back(MakeTensor("col", DType::kF32, {8, 6}, 0));
  spec.tensors.push_back(MakeTensor("row", DType::kF32, {6, 8}, 1));
  spec.tensors.push_back(MakeTensor("rep", DType::kF32, {5}, -1));
  auto map = ShardMap::Build(L("tp=2"), spec);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->Get(1, 0).geometry.ToString(), "box[4:8,0:6]");
  EXPECT_EQ(map->Get(0, 1).geometry.ToString(), "box[0:6,0:4]");
  EXPECT_EQ(map->Get(1, 2).geometry.ToString(), "box[0:5]");
  EXPECT_EQ(map->Get(1, 1).runs.size(), 6u);  // One run per row.
}

TEST(ShardMapTest, FsdpCutsTheFlattenedStageIntoEqualPieces) {
  ModelSpec spec;
  spec.tensors.push_back(MakeTensor("a", DType::kF32, {10}, -1));
  spec.tensors.push_back(MakeTensor("b", DType::kF32, {2, 3}, 0));
  // Flat buffer of 16 elements: a = [0,10), b = [10,16); pieces of 4.
  auto map = ShardMap::Build(L("fsdp=4"), spec);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->Get(0, 0).geometry.ToString(), "runs[0+4]");
  EXPECT_EQ(map->Get(2, 0).geometry.ToString(), "runs[8+2]");
  EXPECT_EQ(map->Get(2, 1).geometry.ToString(), "runs[0+2]");
  EXPECT_EQ(map->Get(3, 1).geometry.ToString(), "runs[2+4]");
  EXPECT_FALSE(map->Get(0, 1).has_shard);
  EXPECT_FALSE(map->Get(3, 0).has_shard);
  // Padding: 16 elements over 5 ranks gives pieces of 4; rank 4 holds none.
  auto five = ShardMap::Build(L("fsdp=5"), spec);
  ASSERT_TRUE(five.ok());
  EXPECT_EQ(five->RankElements(4), 0);
  EXPECT_EQ(five->RankElements(3), 4);
}

TEST(ShardMapTest, TpThenFsdpFlattensTheTpSlice) {
  ModelSpec spec;
  spec.tensors.push_back(MakeTensor("row", DType::kF32, {2, 4}, 1));
  // tp=2: rank tp 1 holds columns [2,4) = global 2,3,6,7; fsdp=2 cuts that
  // 4-element slice in halves: (2,3) and (6,7).
  auto map = ShardMap::Build(L("tp=2,fsdp=2"), spec);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->Get(1, 0).geometry.ToString(), "runs[2+2]");  // tp1 fsdp0
  EXPECT_EQ(map->Get(3, 0).geometry.ToString(), "runs[6+2]");  // tp1 fsdp1
}

TEST(ShardMapTest, PipelineStagesSplitLayersContiguously) {
  ModelSpec spec = TinyLlama(4);
  auto map = ShardMap::Build(L("pp=2"), spec);
  ASSERT_TRUE(map.ok());
  int embed = spec.Find("model.embed_tokens.weight");
  int head = spec.Find("lm_head.weight");
  int l1 = spec.Find("model.layers.1.mlp.up_proj.weight");
  int l2 = spec.Find("model.layers.2.mlp.up_proj.weight");
  EXPECT_TRUE(map->Get(0, embed).has_shard);
  EXPECT_FALSE(map->Get(1, embed).has_shard);
  EXPECT_TRUE(map->Get(1, head).has_shard);
  EXPECT_TRUE(map->Get(0, l1).has_shard);
  EXPECT_FALSE(map->Get(0, l2).has_shard);
  EXPECT_TRUE(map->Get(1, l2).has_shard);
}

TEST(ShardMapTest, LayoutThatDoesNotFitIsAClearError) {
  ModelSpec spec;
  spec.tensors.push_back(MakeTensor("model.layers.0.q", DType::kF32, {6, 4}, 0,
                                    StageRule::Kind::kLayer, 0));
  auto map = ShardMap::Build(L("tp=4"), spec);
  ASSERT_FALSE(map.ok());
  EXPECT_TRUE(map.status().IsInvalidArgument());
  EXPECT_NE(map.status().message().find("not divisible by tp=4"),
            std::string::npos)
      << map.status();
  EXPECT_NE(map.status().message().find("model.layers.0.q"), std::string::npos);
  auto pp = ShardMap::Build(L("pp=2"), spec);  // 1 layer, 2 stages.
  ASSERT_FALSE(pp.ok());
  EXPECT_NE(pp.status().message().find("pp=2"), std::string::npos);
}

}  // namespace
}  // namespace hy::reshard
