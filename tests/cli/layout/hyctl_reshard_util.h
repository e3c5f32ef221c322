// Helpers for the hyctl plan / reshard tests: running hyctl as a
// subprocess, a small model saved through the Store API, and checks of
// resharded versions against the library (ShardMap).

#ifndef HY_TESTS_CLI_LAYOUT_HYCTL_RESHARD_UTIL_H_
#define HY_TESTS_CLI_LAYOUT_HYCTL_RESHARD_UTIL_H_

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "hy/common/hash.h"
#include "hy/reshard/plan.h"
#include "hy/reshard/shard_map.h"
#include "hy/statestore/store.h"
#include "statestore/raw_db.h"
#include "cli/hyctl_run.h"
#include "statestore/store_test_util.h"

namespace hy::cli {

using reshard::Layout;
using reshard::ModelRules;
using reshard::ModelSpec;
using reshard::ShardMap;
using statestore::Store;
using statestore::testing::Bytes;
using statestore::testing::TempDir;

constexpr const char* kOrderBlob = "reshard.tensor_order";

using hy::testing::CmdResult;

inline CmdResult Hyctl(const std::string& args) {
  return hy::testing::RunCommand(std::string(HYCTL_PATH) + " " + args);
}

// A small Qwen2-style critic: q/k/v biases, bf16 and f32, a value head.
inline std::vector<TensorMeta> SmallModel() {
  std::vector<TensorMeta> t;
  auto add = [&t](std::string name, DType d, std::vector<int64_t> shape) {
    t.push_back(TensorMeta{std::move(name), d, std::move(shape)});
  };
  const int64_t hidden = 8, ffn = 12, vocab = 20;
  add("model.embed_tokens.weight", DType::kBF16, {vocab, hidden});
  for (int i = 0; i < 3; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* proj : {"q", "k", "v"}) {
      add(p + "self_attn." + proj + "_proj.weight", DType::kBF16,
          {hidden, hidden});
      add(p + "self_attn." + proj + "_proj.bias", DType::kF32, {hidden});
    }
    add(p + "self_attn.o_proj.weight", DType::kBF16, {hidden, hidden});
    add(p + "mlp.gate_proj.weight", DType::kBF16, {ffn, hidden});
    add(p + "mlp.up_proj.weight", DType::kBF16, {ffn, hidden});
    add(p + "mlp.down_proj.weight", DType::kBF16, {hidden, ffn});
    add(p + "input_layernorm.weight", DType::kF32, {hidden});
    add(p + "post_attention_layernorm.weight", DType::kF32, {hidden});
  }
  add("model.norm.weight", DType::kF32, {hidden});
  add("value_head.weight", DType::kF32, {1, hidden});
  return t;
}

// Every tensor's full contents, by index.
inline std::vector<std::vector<uint8_t>> ModelData(
    const std::vector<TensorMeta>& t) {
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < t.size(); ++i)
    data.push_back(Bytes(*t[i].ByteSize(), 1000 + i));
  return data;
}

// The elements of `runs` of a tensor whose contents are `full`.
inline std::vector<uint8_t> Extract(const std::vector<uint8_t>& full,
                                    const std::vector<FlatRun>& runs,
                                    size_t es) {
  std::vector<uint8_t> out;
  for (const FlatRun& r : runs) {
    out.insert(out.end(), full.begin() + r.offset * es,
               full.begin() + r.end() * es);
  }
  return out;
}

inline Result<std::unique_ptr<Store>> OpenStore(const std::string& path) {
  statestore::StoreOptions o;
  o.threads = 2;
  return Store::Open(path, o);
}

// Saves the model as `version` under `layout` (cut with ShardMap) and
// commits it; with `order_blob`, records the tensor order too.
inline void SaveModel(const std::string& path, uint64_t version,
                      const std::string& layout_text,
                      const std::string& recorded, bool order_blob = true) {
  const std::vector<TensorMeta> metas = SmallModel();
  const auto data = ModelData(metas);
  auto spec = ModelSpec::Build(metas, ModelRules::Default());
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto layout = Layout::Parse(layout_text);
  ASSERT_TRUE(layout.ok()) << layout.status();
  auto map = ShardMap::Build(*layout, *spec);
  ASSERT_TRUE(map.ok()) << map.status();
  auto store = OpenStore(path);
  ASSERT_TRUE(store.ok()) << store.status();
  nlohmann::json order = nlohmann::json::array();
  for (const auto& m : metas) order.push_back(m.name);
  const std::string order_text = order.dump(), config = "{\"n\": 1}",
                    rng = "rank one's rng";
  for (int rank = 0; rank < map->world_size(); ++rank) {
    std::vector<std::vector<uint8_t>> buffers(metas.size());
    statestore::SavePart part;
    part.version = version;
    part.rank = rank;
    for (size_t i = 0; i < metas.size(); ++i) {
      const auto& shard = map->Get(rank, static_cast<int>(i));
      if (!shard.has_shard) continue;
      buffers[i] = Extract(data[i], shard.runs, DTypeSize(metas[i].dtype));
      part.shards.push_back({metas[i], shard.geometry, ConstBytes(buffers[i])});
    }
    if (rank == 0) {
      part.blobs.push_back({"config", statestore::kReplicatedBlob, config});
      if (order_blob) {
        part.blobs.push_back(
            {kOrderBlob, statestore::kReplicatedBlob, order_text});
      }
    }
    if (rank == 1) part.blobs.push_back({"rng", 1, rng});
    ASSERT_TRUE((*store)->Save(part, nullptr).ok());
  }
  statestore::CommitRecord c;
  c.version = version;
  c.step = 5;
  c.world_size = map->world_size();
  c.layout = recorded;
  ASSERT_TRUE((*store)->Commit(c).ok());
}

// Checks that every rank's shard of `version` is what `layout_text` gives
// the model in the order the version's order blob lists, bit for bit.
inline void ExpectResharded(const std::string& path, uint64_t version,
                            const std::string& layout_text) {
  const std::vector<TensorMeta> metas = SmallModel();
  const auto data = ModelData(metas);
  auto store = OpenStore(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto m = (*store)->ReadManifest(version);
  ASSERT_TRUE(m.ok()) << m.status();
  auto layout = Layout::Parse(layout_text);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(m->commit.layout, layout->ToString());
  EXPECT_EQ(m->commit.world_size, layout->world_size());
  EXPECT_EQ(m->commit.step, 5u);
  auto rules = ModelRules::ParseYaml(m->commit.model_rules);
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_EQ(rules->ToYaml(), ModelRules::Default().ToYaml());

  auto order = (*store)->ReadBlob(version, kOrderBlob);
  ASSERT_TRUE(order.ok()) << order.status();
  std::vector<TensorMeta> ordered;
  for (const std::string& name :
       nlohmann::json::parse(*order).get<std::vector<std::string>>()) {
    auto it = std::find_if(metas.begin(), metas.end(),
                           [&](const TensorMeta& t) { return t.name == name; });
    ASSERT_NE(it, metas.end()) << name;
    ordered.push_back(*it);
  }
  ASSERT_EQ(ordered.size(), metas.size());
  auto spec = ModelSpec::Build(ordered, ModelRules::Default());
  ASSERT_TRUE(spec.ok());
  auto map = ShardMap::Build(*layout, *spec);
  ASSERT_TRUE(map.ok());
  for (int i = 0; i < static_cast<int>(ordered.size()); ++i) {
    const TensorMeta& meta = ordered[i];
    const size_t index =
        std::find(metas.begin(), metas.end(), meta) - metas.begin();
    const auto& entry = m->tensors.at(meta.name);
    EXPECT_EQ(entry.meta, meta);
    for (int rank = 0; rank < map->world_size(); ++rank) {
      const auto& shard = map->Get(rank, i);
      const auto held = std::find_if(
          entry.shards.begin(), entry.shards.end(),
          [rank](const statestore::ShardEntry& e) { return e.rank == rank; });
      std::vector<uint8_t> got(shard.num_elements * DTypeSize(meta.dtype));
      Status s =
          (*store)->ReadShard(version, meta.name, rank, MutableBytes(got));
      if (!shard.has_shard) {
        EXPECT_EQ(held, entry.shards.end()) << meta.name << " rank " << rank;
        EXPECT_TRUE(s.IsNotFound()) << s;
        continue;
      }
      ASSERT_NE(held, entry.shards.end()) << meta.name << " rank " << rank;
      EXPECT_EQ(held->geometry, shard.geometry) << meta.name;
      ASSERT_TRUE(s.ok()) << meta.name << " rank " << rank << ": " << s;
      EXPECT_EQ(got, Extract(data[index], shard.runs, DTypeSize(meta.dtype)))
          << meta.name << " rank " << rank;
    }
  }
  // Replicated blobs carry over, per-rank ones do not.
  EXPECT_EQ(*(*store)->ReadBlob(version, "config"), "{\"n\": 1}");
  EXPECT_TRUE((*store)->ReadBlob(version, "rng", 1).status().IsNotFound());
}

inline std::vector<uint64_t> Versions(const std::string& path) {
  auto store = OpenStore(path);
  EXPECT_TRUE(store.ok()) << store.status();
  std::vector<uint64_t> out;
  if (!store.ok()) return out;
  auto versions = (*store)->ListVersions();
  EXPECT_TRUE(versions.ok()) << versions.status();
  if (!versions.ok()) return out;
  for (const auto& v : *versions) out.push_back(v.version);
  return out;
}

inline std::string WriteFile(const TempDir& dir, const std::string& name,
                             const std::string& text) {
  const std::string path = dir.Sub(name);
  std::ofstream(path) << text;
  return path;
}

}  // namespace hy::cli

#endif  // HY_TESTS_CLI_LAYOUT_HYCTL_RESHARD_UTIL_H_
