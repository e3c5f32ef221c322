// hyctl plan and reshard, run as a real subprocess on real stores; the
// expected shards come from the library (ShardMap, Plan).

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "hy/common/hash.h"
#include "hy/reshard/plan.h"
#include "hy/reshard/shard_map.h"
#include "hy/statestore/store.h"
#include "statestore/raw_db.h"
#include "statestore/store_test_util.h"

namespace hy::cli {
namespace {

using reshard::Layout;
using reshard::ModelRules;
using reshard::ModelSpec;
using reshard::ShardMap;
using statestore::Store;
using statestore::testing::Bytes;
using statestore::testing::TempDir;

constexpr const char* kOrderBlob = "reshard.tensor_order";

struct CmdResult {
  int code = -1;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

CmdResult Hyctl(const std::string& args) {
  CmdResult r;
  const std::string err_path = ::testing::TempDir() + "hyctl-reshard-" +
                               std::to_string(getpid()) + ".stderr";
  const std::string cmd =
      std::string(HYCTL_PATH) + " " + args + " 2>" + err_path;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = Slurp(err_path);
  std::remove(err_path.c_str());
  return r;
}

// A small Qwen2-style critic: q/k/v biases, bf16 and f32, a value head.
std::vector<TensorMeta> SmallModel() {
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
std::vector<std::vector<uint8_t>> ModelData(const std::vector<TensorMeta>& t) {
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < t.size(); ++i)
    data.push_back(Bytes(*t[i].ByteSize(), 1000 + i));
  return data;
}

// The elements of `runs` of a tensor whose contents are `full`.
std::vector<uint8_t> Extract(const std::vector<uint8_t>& full,
                             const std::vector<FlatRun>& runs, size_t es) {
  std::vector<uint8_t> out;
  for (const FlatRun& r : runs) {
    out.insert(out.end(), full.begin() + r.offset * es,
               full.begin() + r.end() * es);
  }
  return out;
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& path) {
  statestore::StoreOptions o;
  o.threads = 2;
  return Store::Open(path, o);
}

// Saves the model as `version` under `layout` (cut with ShardMap) and
// commits it; with `order_blob`, records the tensor order too.
void SaveModel(const std::string& path, uint64_t version,
               const std::string& layout_text, const std::string& recorded,
               bool order_blob = true) {
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
void ExpectResharded(const std::string& path, uint64_t version,
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

std::vector<uint64_t> Versions(const std::string& path) {
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

TEST(HyctlReshardTest, FsdpToTpDpIsBitExactAndBackDedupes) {
  TempDir dir;
  const std::string store = dir.Sub("store");
  SaveModel(store, 1, "fsdp=4", "fsdp=4");
  CmdResult r = Hyctl("reshard " + store + " --version 1 --to dp=2,tp=2");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("resharded version 1 (fsdp=4, 4 ranks) to version 2 "
                       "(tp=2,dp=2, 4 ranks)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("dropping rank 1's blob 'rng'"), std::string::npos)
      << r.err;
  ExpectResharded(store, 2, "tp=2,dp=2");
  r = Hyctl("verify " + store);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = Hyctl("inspect " + store);
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("tp=2,dp=2"), std::string::npos) << r.out;

  // Back to fsdp=4: the same shards as version 1, so no chunk is new.
  r = Hyctl("reshard " + store + " --version 2 --to fsdp=4 --new-version 7");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("to version 7"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(0 of"), std::string::npos) << r.out;
  ExpectResharded(store, 7, "fsdp=4");
  EXPECT_EQ(Versions(store), (std::vector<uint64_t>{1, 2, 7}));
}

TEST(HyctlReshardTest, NoOrderBlobNoLayoutUsesNaturalOrder) {
  TempDir dir;
  const std::string store = dir.Sub("store");
  SaveModel(store, 3, "dp=1", "", /*order_blob=*/false);
  CmdResult r = Hyctl("reshard " + store + " --version 3 --to tp=2,fsdp=3");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(no layout, 1 ranks) to version 4"), std::string::npos)
      << r.out;
  {
    auto s = OpenStore(store);
    ASSERT_TRUE(s.ok());
    auto order = (*s)->ReadBlob(4, kOrderBlob);
    ASSERT_TRUE(order.ok()) << order.status();
    auto names = nlohmann::json::parse(*order).get<std::vector<std::string>>();
    ASSERT_EQ(names.size(), SmallModel().size());
    EXPECT_EQ(names[0], "model.embed_tokens.weight");
    EXPECT_EQ(names[1], "model.layers.0.input_layernorm.weight");
    EXPECT_EQ(names.back(), "value_head.weight");
  }
  ExpectResharded(store, 4, "tp=2,fsdp=3");
  EXPECT_EQ(Hyctl("verify " + store + " --version 4").code, 0);

  // plan --store takes the tensors, layout and rules of the version.
  r = Hyctl("plan --store " + store + " --version 4 --to tp=2,fsdp=3 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["from"], "tp=2,fsdp=3");
  EXPECT_EQ(j["network_bytes"], 0);
  EXPECT_EQ(j["local_bytes"], j["dst_bytes"]);
}

std::string WriteFile(const TempDir& dir, const std::string& name,
                      const std::string& text) {
  const std::string path = dir.Sub(name);
  std::ofstream(path) << text;
  return path;
}

TEST(HyctlReshardTest, PlanKnownPair) {
  TempDir dir;
  const std::string spec = WriteFile(
      dir, "spec.json",
      R"([{"name": "lm_head.weight", "dtype": "f32", "shape": [8, 4]}])");
  auto plan = [&](const std::string& args) {
    CmdResult r = Hyctl("plan --model-spec " + spec + " " + args + " -o json");
    EXPECT_EQ(r.code, 0) << args << ": " << r.err;
    return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  };
  // fsdp=2 cuts the 8x4 f32 tensor into rows 0-3 and 4-7, as tp=2 does.
  auto j = plan("--from fsdp=2 --to tp=2 --ranks-per-node 1");
  EXPECT_EQ(j["local_bytes"], 128);
  EXPECT_EQ(j["network_bytes"], 0);
  EXPECT_EQ(j["steps"], 0);
  // To dp=2 each rank keeps its half and receives the other 64 bytes.
  j = plan("--from fsdp=2 --to dp=2 --ranks-per-node 1");
  EXPECT_EQ(j["dst_bytes"], 256);
  EXPECT_EQ(j["local_bytes"], 128);
  EXPECT_EQ(j["cross_node_bytes"], 128);
  EXPECT_EQ(j["same_node_bytes"], 0);
  EXPECT_EQ(j["max_send_bytes"], 64);
  EXPECT_EQ(j["max_recv_bytes"], 64);
  EXPECT_EQ(j["steps"], 1);
  j = plan("--from fsdp=2 --to dp=2");  // 8 ranks per node.
  EXPECT_EQ(j["same_node_bytes"], 128);
  EXPECT_EQ(j["cross_node_bytes"], 0);
  j = plan("--from fsdp=2 --to dp=2 --bucket-mib 0.000030517578125");
  EXPECT_EQ(j["bucket_bytes"], 32);
  EXPECT_EQ(j["steps"], 2);

  // The same numbers as the library's plan for the small model.
  nlohmann::json model = nlohmann::json::array();
  for (const auto& t : SmallModel()) {
    model.push_back({{"name", t.name},
                     {"dtype", std::string(SafetensorsName(t.dtype))},
                     {"shape", t.shape}});
  }
  const std::string model_spec = WriteFile(dir, "model.json", model.dump());
  CmdResult r = Hyctl("plan --model-spec " + model_spec +
                      " --from fsdp=4 --to tp=2,dp=2 --ranks-per-node 2 "
                      "--bucket-mib 0.001 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  auto lib =
      reshard::Plan(*Layout::Parse("fsdp=4"), *Layout::Parse("tp=2,dp=2"),
                    *ModelSpec::Build(SmallModel(), ModelRules::Default()),
                    reshard::Topology{4, 2}, reshard::PlanOptions{1049});
  ASSERT_TRUE(lib.ok()) << lib.status();
  EXPECT_EQ(j["local_bytes"], lib->stats.local_bytes);
  EXPECT_EQ(j["same_node_bytes"], lib->stats.same_node_bytes);
  EXPECT_EQ(j["cross_node_bytes"], lib->stats.cross_node_bytes);
  EXPECT_EQ(j["max_send_bytes"], lib->stats.max_send_bytes);
  EXPECT_EQ(j["peak_staging_bytes"], lib->stats.peak_staging_bytes);
  EXPECT_EQ(j["steps"], lib->steps.size());
  EXPECT_GT(j["cross_node_bytes"].get<int64_t>(), 0);

  r = Hyctl("plan --model-spec " + model_spec +
            " --from fsdp=4 --to tp=2,dp=2 --ranks-per-node 2");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* want :
       {"plan fsdp=4 -> tp=2,dp=2: 4 ranks, 2 per node", "local", "same_node",
        "cross_node", "max_send_per_rank", "max_recv_per_rank", "peak_staging",
        " steps, "}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
}

TEST(HyctlReshardTest, PlanErrors) {
  TempDir dir;
  const std::string spec = WriteFile(
      dir, "spec.json",
      R"([{"name": "lm_head.weight", "dtype": "f32", "shape": [8, 4]}])");
  const std::string base = "plan --model-spec " + spec;
  CmdResult r = Hyctl(base + " --from dp=3 --to tp=3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("lm_head.weight"), std::string::npos) << r.err;
  r = Hyctl(base + " --from fsdp=2 --to tp=4");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("world size mismatch"), std::string::npos) << r.err;
  r = Hyctl(base + " --from fsdp=2 --to tpp=2");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--to"), std::string::npos) << r.err;
  r = Hyctl(base + " --to tp=2");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--from is required"), std::string::npos) << r.err;
  EXPECT_EQ(Hyctl("plan --from dp=2 --to tp=2").code, 64);
  EXPECT_EQ(Hyctl(base + " --from dp=2").code, 64);
  EXPECT_EQ(Hyctl("plan --store " + dir.Sub("s") + " --to dp=2").code, 64);
  EXPECT_EQ(Hyctl(base + " --store x --version 1 --to dp=2").code, 64);
  EXPECT_EQ(Hyctl(base + " --from dp=2 --to dp=2 --ranks-per-node 0").code, 64);

  r = Hyctl("plan --model-spec " + dir.Sub("absent.json") +
            " --from dp=2 --to dp=2");
  EXPECT_EQ(r.code, 2);
  const std::string bad = WriteFile(
      dir, "bad.json", R"([{"name": "x", "dtype": "f33", "shape": [1]}])");
  r = Hyctl("plan --model-spec " + bad + " --from dp=2 --to dp=2");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("entry 0 ('x'): unknown dtype 'f33'"), std::string::npos)
      << r.err;
  const std::string unknown = WriteFile(
      dir, "unknown.json", R"([{"name": "x", "dtype": "f32", "shape": [1]}])");
  r = Hyctl("plan --model-spec " + unknown + " --from dp=2 --to dp=2");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no model rule matches tensor 'x'"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--rules"), std::string::npos) << r.err;
  const std::string rules =
      WriteFile(dir, "rules.yaml", "rules:\n  - pattern: 'x'\n    tp_dim: 0\n");
  r = Hyctl("plan --model-spec " + unknown + " --rules " + rules +
            " --from dp=2 --to dp=2 -o json");
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(HyctlReshardTest, BadInputWritesNothing) {
  TempDir dir;
  const std::string store = dir.Sub("store");
  SaveModel(store, 1, "fsdp=4", "fsdp=4");
  const std::string base = "reshard " + store;

  // hidden 8 is not divisible by tp=3.
  CmdResult r = Hyctl(base + " --version 1 --to tp=3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("hyctl reshard: InvalidArgument"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("model."), std::string::npos) << r.err;
  r = Hyctl(base + " --version 9 --to tp=2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("9"), std::string::npos) << r.err;
  r = Hyctl(base + " --version 1 --to tp=two");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--to"), std::string::npos) << r.err;
  r = Hyctl(base + " --version 1 --to tp=2 --new-version 1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("version 1 exists already"), std::string::npos) << r.err;
  const std::string rules =
      WriteFile(dir, "rules.yaml", "rules:\n  - pattern: 'nothing'\n");
  r = Hyctl(base + " --version 1 --to tp=2 --rules " + rules);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no model rule matches"), std::string::npos) << r.err;
  r = Hyctl(base + " --version 1 --to tp=2 --rules " + dir.Sub("absent"));
  EXPECT_EQ(r.code, 2);
  const std::string broken = WriteFile(dir, "broken.yaml", "rules: [");
  r = Hyctl(base + " --version 1 --to tp=2 --rules " + broken);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("broken.yaml: model rules: bad YAML"), std::string::npos)
      << r.err;
  EXPECT_EQ(Hyctl(base + " --to tp=2").code, 64);  // --version is required.
  EXPECT_EQ(
      Hyctl("reshard " + dir.Sub("absent") + " --version 1 --to tp=2").code, 2);
  EXPECT_EQ(Versions(store), std::vector<uint64_t>{1});
  EXPECT_EQ(Hyctl("verify " + store).code, 0);
}

TEST(HyctlReshardTest, CorruptSourceAbortsTheNewVersion) {
  TempDir dir;
  const std::string store = dir.Sub("store");
  SaveModel(store, 1, "fsdp=4", "fsdp=4");
  std::string victim;  // A chunk of a tensor: every rank of dp=4 reads it.
  {
    auto s = OpenStore(store);
    ASSERT_TRUE(s.ok());
    auto m = (*s)->ReadManifest(1);
    ASSERT_TRUE(m.ok());
    victim = m->tensors.at("model.norm.weight")
                 .shards.at(0)
                 .chunks.at(0)
                 .address.ToHex();
  }
  {
    statestore::testing::RawDb raw(store);
    ASSERT_TRUE(raw.ok());
    auto* chunks = raw.cf(statestore::testing::kChunksCf);
    std::unique_ptr<rocksdb::Iterator> it(
        raw.db()->NewIterator(rocksdb::ReadOptions(), chunks));
    bool found = false;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const auto* key = reinterpret_cast<const uint8_t*>(it->key().data());
      if (Hash128::DecodeFrom(key + 8).ToHex() != victim) continue;
      std::string value = it->value().ToString();
      value.back() ^= 1;
      ASSERT_TRUE(raw.db()
                      ->Put(rocksdb::WriteOptions(), chunks, it->key(), value)
                      .ok());
      found = true;
      break;
    }
    ASSERT_TRUE(found) << victim;
  }
  CmdResult r = Hyctl("reshard " + store + " --version 1 --to dp=4");
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  auto s = OpenStore(store);
  ASSERT_TRUE(s.ok());
  auto versions = (*s)->ListVersions();
  ASSERT_TRUE(versions.ok());
  ASSERT_EQ(versions->size(), 2u);
  EXPECT_FALSE((*versions)[1].committed);
  EXPECT_TRUE((*versions)[1].aborted);
  EXPECT_TRUE((*versions)[1].prepared.empty());
  EXPECT_EQ(*(*s)->LatestCommitted(), 1u);
}

}  // namespace
}  // namespace hy::cli
