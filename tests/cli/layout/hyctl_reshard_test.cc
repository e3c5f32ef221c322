// hyctl reshard, run as a real subprocess on real stores; the expected
// shards come from the library (ShardMap).

#include <gtest/gtest.h>

#include "cli/layout/hyctl_reshard_util.h"

namespace hy::cli {
namespace {

TEST(HyctlReshardTest, FsdpToTpDpIsBitExactAndBackDedupes) {
  TempDir dir;
  const std::string store = dir.Sub("store");
  SaveModel(store, 1, "fsdp=4", "fsdp=4");
  CmdResult r = Hyctl("reshard " + store + " --version-id 1 --to dp=2,tp=2");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(version 1, fsdp=4, 4 ranks) to version 2 "
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
  r = Hyctl("reshard " + store + " --version-id 2 --to fsdp=4 --new-version 7");
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
  CmdResult r = Hyctl("reshard " + store + " --version-id 3 --to tp=2,fsdp=3");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(version 3, no layout, 1 ranks) to version 4"),
            std::string::npos)
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
  EXPECT_EQ(Hyctl("verify " + store + " --version-id 4").code, 0);

  // plan --store takes the tensors, layout and rules of the version.
  r = Hyctl("plan --store " + store +
            " --version-id 4 --to tp=2,fsdp=3 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["from"], "tp=2,fsdp=3");
  EXPECT_EQ(j["network_bytes"], 0);
  EXPECT_EQ(j["local_bytes"], j["dst_bytes"]);
}

TEST(HyctlReshardTest, BadInputWritesNothing) {
  TempDir dir;
  const std::string store = dir.Sub("store");
  SaveModel(store, 1, "fsdp=4", "fsdp=4");
  const std::string base = "reshard " + store;

  // hidden 8 is not divisible by tp=3.
  CmdResult r = Hyctl(base + " --version-id 1 --to tp=3");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("hyctl reshard: InvalidArgument"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("model."), std::string::npos) << r.err;
  r = Hyctl(base + " --version-id 9 --to tp=2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("9"), std::string::npos) << r.err;
  r = Hyctl(base + " --version-id 1 --to tp=two");
  EXPECT_EQ(r.code, 64);  // A bad layout is a usage error.
  EXPECT_NE(r.err.find("--to"), std::string::npos) << r.err;
  r = Hyctl(base + " --version-id 1 --to tp=2 --new-version 1");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("version 1 exists already"), std::string::npos) << r.err;
  const std::string rules =
      WriteFile(dir, "rules.yaml", "rules:\n  - pattern: 'nothing'\n");
  r = Hyctl(base + " --version-id 1 --to tp=2 --rules " + rules);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no model rule matches"), std::string::npos) << r.err;
  r = Hyctl(base + " --version-id 1 --to tp=2 --rules " + dir.Sub("absent"));
  EXPECT_EQ(r.code, 2);
  const std::string broken = WriteFile(dir, "broken.yaml", "rules: [");
  r = Hyctl(base + " --version-id 1 --to tp=2 --rules " + broken);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("broken.yaml: model rules: bad YAML"), std::string::npos)
      << r.err;
  // The step given twice; a run root's options on a store.
  EXPECT_EQ(Hyctl(base + "@1 --step 1 --to tp=2").code, 64);
  EXPECT_EQ(Hyctl(base + " --to tp=2 --out " + dir.Sub("o")).code, 64);
  EXPECT_EQ(
      Hyctl("reshard " + dir.Sub("absent") + " --version-id 1 --to tp=2").code,
      2);
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
  CmdResult r = Hyctl("reshard " + store + " --version-id 1 --to dp=4");
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
