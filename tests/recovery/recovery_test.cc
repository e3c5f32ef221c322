// hy::recovery on real RocksDB stores: ranks are threads over an in-process
// transport; a lost node is a deleted node directory.

#include "hy/recovery/recovery.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "hy/checkpoint/checkpoint.h"
#include "hy/common/shard.h"
#include "hy/recovery/node_layout.h"
#include "hy/statestore/store.h"
#include "recovery/save_run.h"
#include "statestore/raw_db.h"
#include "statestore/store_test_util.h"

namespace hy::recovery {
namespace {

using statestore::testing::TempDir;
using testing::kNumel;
using testing::kTensors;
using testing::RunRanks;
using testing::SaveRun;
using testing::ShardOf;
using testing::Value;

struct Recovered {
  Status status;
  uint64_t step = 0;
  std::string blob;
  std::vector<std::vector<float>> data;  // Per tensor: this rank's shard.
  RecoveryStats stats;
};

// A new world of nodes.size() ranks recovers and fetches fsdp shards
// (fetch_bytes 0: the default bound).
std::vector<Recovered> Recover(const std::string& root,
                               const std::vector<int>& nodes,
                               uint64_t fetch_bytes = 0) {
  const int world = static_cast<int>(nodes.size());
  reshard::InProcessHub hub(world, 30000);
  std::vector<std::unique_ptr<reshard::Transport>> ts;
  for (int r = 0; r < world; ++r) ts.push_back(hub.Connect(r));
  std::vector<Recovered> out(world);
  RunRanks(world, [&](int r) {
    Recovered& mine = out[r];
    RecoveryOptions o;
    o.root = root;
    o.nodes = nodes;
    if (fetch_bytes > 0) o.fetch_bytes = fetch_bytes;
    auto rec = Recovery::Open(ts[r].get(), o);
    if (!rec.ok()) {
      mine.status = rec.status();
      return;
    }
    ASSERT_TRUE((*rec)->has_state());
    mine.step = (*rec)->choice().commit.step;
    auto blob = (*rec)->FetchBlob("trainer.state");
    mine.status = blob.status();
    if (!blob.ok()) return;
    mine.blob = *blob;
    const FlatRun run = ShardOf(r, world, kNumel);
    std::vector<TensorNeed> needs;
    mine.data.resize(kTensors.size());
    for (size_t t = 0; t < kTensors.size(); ++t) {
      mine.data[t].assign(run.length, -1.0f);
      needs.push_back(
          {kTensors[t], run,
           MutableBytes(reinterpret_cast<uint8_t*>(mine.data[t].data()),
                        mine.data[t].size() * 4)});
    }
    mine.status = (*rec)->Fetch(needs);
    mine.stats = (*rec)->stats();
  });
  return out;
}

void ExpectState(const std::vector<Recovered>& got, uint64_t step) {
  const int world = static_cast<int>(got.size());
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(got[r].status.ok()) << "rank " << r << ": " << got[r].status;
    EXPECT_EQ(got[r].step, step);
    EXPECT_EQ(got[r].blob, "state@" + std::to_string(step));
    const FlatRun run = ShardOf(r, world, kNumel);
    for (size_t t = 0; t < kTensors.size(); ++t) {
      for (int64_t i = 0; i < run.length; ++i) {
        ASSERT_EQ(got[r].data[t][i],
                  Value(step, static_cast<int>(t), run.offset + i))
            << "rank " << r << " tensor " << t << " element " << i;
      }
    }
  }
}

TEST(NodeLayoutTest, RingPlacementSkipsOwnNodeAndSpreadsCopies) {
  const std::vector<int> nodes = {0, 1, 2, 3};
  EXPECT_EQ(ReplicaHolderRanks(0, nodes, 1), (std::vector<int>{1}));
  EXPECT_EQ(ReplicaHolderRanks(3, nodes, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(ReplicaHolderRanks(1, nodes, 9), (std::vector<int>{2, 3, 0}));
  EXPECT_EQ(ReplicaSourceRanks(0, nodes, 1), (std::vector<int>{3}));
  // Two ranks on node 5: rank 0's copy skips rank 1 (same node).
  EXPECT_EQ(ReplicaHolderRanks(0, {5, 5, 6}, 1), (std::vector<int>{2}));
  EXPECT_TRUE(ReplicaHolderRanks(0, {7}, 1).empty());
  // One host: the copy goes to another rank of it (a lost process or disk).
  EXPECT_EQ(ReplicaHolderRanks(2, {4, 4, 4}, 1), (std::vector<int>{0}));
  // Other hosts first, then other ranks.
  EXPECT_EQ(ReplicaHolderRanks(0, {0, 0, 1, 1}, 2), (std::vector<int>{2, 1}));
  // A host's ranks send to the next host's rank of the same slot.
  EXPECT_EQ(ReplicaSourceRanks(0, {0, 0, 1, 1}, 1), (std::vector<int>{2}));
  EXPECT_EQ(ReplicaSourceRanks(1, {0, 0, 1, 1}, 1), (std::vector<int>{3}));
  EXPECT_EQ(ReplicaHolderRanks(4, {0, 0, 1, 1, 2}, 2),
            (std::vector<int>{0, 2}));
  // Hints kept, then existing nodes, then fresh ids.
  EXPECT_EQ(AssignNodes({-1, -1, -1}, {0, 1, 3}), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(AssignNodes({3, -1, -1, -1}, {0, 3}),
            (std::vector<int>{3, 0, 4, 5}));
  EXPECT_EQ(VersionStep(MakeVersion(42, 7)), 42u);
  EXPECT_EQ(VersionGeneration(MakeVersion(42, 7)), 7u);
  EXPECT_LT(MakeVersion(41, 9), MakeVersion(42, 0));
}

TEST(RecoveryTest, LostNodeIsRebuiltOnThreeRanksFromItsReplica) {
  TempDir dir;
  SaveRun(dir.path(), 4, {2, 4});
  ASSERT_TRUE(std::filesystem::exists(ReplicaStorePath(dir.path(), 3, 2)));
  std::filesystem::remove_all(NodeDir(dir.path(), 2));
  const auto got = Recover(dir.path(), {0, 1, 3});
  ExpectState(got, 4);
  // Old rank 2's part came from node 3's replica: rank 2 of the new world
  // (node 3) read some locally and sent the rest.
  uint64_t sent = 0;
  for (const auto& g : got) sent += g.stats.sent_bytes;
  EXPECT_GT(sent, 0u);
  // Every committed version left is still verifiable, in every copy.
  for (int node : {0, 1, 3}) {
    auto stores = ListNodeStores(dir.path(), node);
    ASSERT_TRUE(stores.ok());
    for (const StoreLocation& where : *stores) {
      statestore::StoreOptions o;
      o.read_only = true;
      auto store = statestore::Store::Open(where.path, o);
      ASSERT_TRUE(store.ok()) << store.status();
      auto versions = (*store)->ListVersions();
      ASSERT_TRUE(versions.ok());
      for (const auto& v : *versions) {
        if (!v.committed) continue;
        auto report = (*store)->Verify(v.version);
        ASSERT_TRUE(report.ok());
        EXPECT_TRUE(report->ok()) << where.path;
      }
    }
  }
}

TEST(RecoveryTest, LostHostOfTwoRanksIsRebuiltOnTheTwoHostsLeft) {
  TempDir dir;
  // 3 hosts x 2 ranks: each rank its own store in its host's directory.
  const std::vector<int> nodes = {0, 0, 1, 1, 2, 2};
  SaveRun(dir.path(), 6, {3, 5}, nodes);
  for (int node : {0, 1, 2}) {
    EXPECT_TRUE(std::filesystem::exists(PrimaryStorePath(dir.path(), node, 0)));
    EXPECT_TRUE(std::filesystem::exists(PrimaryStorePath(dir.path(), node, 1)));
  }
  // Host 2's parts (ranks 4 and 5) are copied to the next host (0), by its
  // ranks of the same slots, never to host 2 itself.
  EXPECT_TRUE(std::filesystem::exists(ReplicaStorePath(dir.path(), 0, 2, 0)));
  EXPECT_TRUE(std::filesystem::exists(ReplicaStorePath(dir.path(), 0, 2, 1)));
  EXPECT_FALSE(std::filesystem::exists(ReplicaStorePath(dir.path(), 2, 2, 0)));
  std::filesystem::remove_all(NodeDir(dir.path(), 2));
  ExpectState(Recover(dir.path(), {0, 0, 1, 1}), 5);
  // And on one rank per host left.
  ExpectState(Recover(dir.path(), {0, 1}), 5);
}

TEST(RecoveryTest, PartLargerThanTheStagingBudgetIsSavedReplicatedRecovered) {
  TempDir dir;
  // Each rank's part (2 tensors x 250 floats + a blob) is 2000+ bytes; the
  // staging budget is 512: each checkpoint's shards are read in place while
  // Save waits (a bounded blocking copy), in 1 KiB chunks, then committed,
  // replicated and recovered bit for bit. The fetch sends the lost rank's
  // shards in rounds of at most 128 bytes.
  SaveRun(dir.path(), 4, {2, 4}, {}, 512);
  std::filesystem::remove_all(NodeDir(dir.path(), 1));
  const auto got = Recover(dir.path(), {0, 2, 3}, 128);
  ExpectState(got, 4);
  uint64_t received = 0;
  int most_rounds = 0;
  for (const Recovered& g : got) {
    EXPECT_LE(g.stats.largest_round_bytes, 128u);
    received += g.stats.received_bytes;
    most_rounds = std::max(most_rounds, g.stats.fetch_rounds);
  }
  // More than one round's worth for all 3 ranks went over the wire, so some
  // rank took several rounds; with the default bound one round does.
  EXPECT_GT(received, 3 * 128u);
  EXPECT_GT(most_rounds, 1);
  for (const Recovered& g : Recover(dir.path(), {0, 2, 3})) {
    EXPECT_EQ(g.stats.fetch_rounds, 1);
  }
}

TEST(RecoveryTest, GrowsToMoreRanksOnAFreshNode) {
  TempDir dir;
  SaveRun(dir.path(), 4, {6});
  ExpectState(Recover(dir.path(), {0, 1, 2, 3, 4}), 6);
}

TEST(RecoveryTest, CorruptedCopyIsReplacedByTheOtherOne) {
  TempDir dir;
  SaveRun(dir.path(), 4, {2});
  {  // Flip a byte in every chunk of node 1's primary store.
    statestore::testing::RawDb raw(PrimaryStorePath(dir.path(), 1));
    std::unique_ptr<rocksdb::Iterator> it(raw.db()->NewIterator(
        rocksdb::ReadOptions(), raw.cf(statestore::testing::kChunksCf)));
    int damaged = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      std::string value = it->value().ToString();
      value[value.size() / 2] ^= 0x20;
      ASSERT_TRUE(raw.db()
                      ->Put(rocksdb::WriteOptions(),
                            raw.cf(statestore::testing::kChunksCf),
                            it->key().ToString(), value)
                      .ok());
      ++damaged;
    }
    ASSERT_GT(damaged, 0);
  }
  ExpectState(Recover(dir.path(), {0, 1, 2, 3}), 2);
}

TEST(RecoveryTest, AllCopiesLostIsAClearDataLoss) {
  TempDir dir;
  SaveRun(dir.path(), 4, {2});
  // Rank 1's primary (node 1) and its only replica (node 2).
  std::filesystem::remove_all(NodeDir(dir.path(), 1));
  std::filesystem::remove_all(NodeDir(dir.path(), 2));
  const auto got = Recover(dir.path(), {0, 3});
  for (const Recovered& g : got) {
    EXPECT_TRUE(g.status.IsDataLoss()) << g.status;
    EXPECT_NE(g.status.message().find("old rank(s) 1"), std::string::npos)
        << g.status;
  }
}

TEST(RecoveryTest, UndecidedVersionIsNeverPickedAndIsAborted) {
  TempDir dir;
  SaveRun(dir.path(), 4, {2});
  // A crash mid-commit of step 4: ranks 0-2 prepared, nobody committed.
  for (int r = 0; r < 3; ++r) {
    statestore::StoreOptions o;
    auto store = statestore::Store::Open(PrimaryStorePath(dir.path(), r), o);
    ASSERT_TRUE(store.ok());
    const FlatRun run = ShardOf(r, 4, kNumel);
    std::vector<float> junk(run.length, 9.0f);
    statestore::SavePart part;
    part.version = MakeVersion(4, 0);
    part.rank = r;
    statestore::ShardData d;
    d.meta = {kTensors[0], DType::kF32, {kNumel}};
    d.geometry = ShardGeometry::FromRuns({run});
    d.data = ConstBytes(junk.data(), junk.size() * 4);
    part.shards.push_back(d);
    ASSERT_TRUE((*store)->Save(part, nullptr).ok());
  }
  const auto got = Recover(dir.path(), {0, 1, 2, 3});
  ExpectState(got, 2);
  int aborts = 0;
  for (const auto& g : got) aborts += g.stats.settled_aborts;
  EXPECT_EQ(aborts, 3);
}

TEST(RecoveryTest, FreshRootHasNoState) {
  TempDir dir;
  reshard::InProcessHub hub(1);
  auto t = hub.Connect(0);
  RecoveryOptions o;
  o.root = dir.path() + "/none";
  o.nodes = {0};
  auto rec = Recovery::Open(t.get(), o);
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_FALSE((*rec)->has_state());
  EXPECT_EQ((*rec)->next_generation(), 0u);
}

}  // namespace
}  // namespace hy::recovery
