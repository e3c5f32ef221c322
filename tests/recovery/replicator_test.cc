// Replicator on two ranks over InProcessHub: each rank's committed part is
// copied into a replica store on the other's node, bit for bit, in as many
// all-to-all rounds as its messages (message_bytes) take, while the
// holder's buffer stays piece_bytes.

#include "hy/recovery/replicator.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "hy/recovery/node_layout.h"
#include "hy/statestore/store.h"
#include "statestore/store_test_util.h"

namespace hy::recovery {
namespace {

using statestore::testing::Bytes;
using statestore::testing::TempDir;

constexpr int64_t kFloats = 16 * 1024;  // 64 KiB per rank.

// Saves and commits rank r's part (version 1) in its primary store.
std::unique_ptr<statestore::Store> SavePrimary(const std::string& root, int r,
                                               const std::vector<uint8_t>& v) {
  statestore::StoreOptions o;
  o.chunk_bytes = 4096;
  auto store =
      std::move(statestore::Store::Open(PrimaryStorePath(root, r), o)).value();
  statestore::SavePart part;
  part.version = 1;
  part.rank = r;
  statestore::ShardData d;
  d.meta = TensorMeta{"w", DType::kF32, {2 * kFloats}};
  d.geometry = ShardGeometry::FromRuns({FlatRun{r * kFloats, kFloats}});
  d.data = ConstBytes(v);
  part.shards.push_back(d);
  EXPECT_TRUE(store->Save(part, nullptr).ok());
  statestore::CommitRecord c;
  c.version = 1;
  c.world_size = 2;
  c.ranks = {r};
  EXPECT_TRUE(store->Commit(c).ok());
  return store;
}

// Replicates version 1 on both ranks; returns rank 0's stats.
ReplicateStats ReplicateBoth(const std::string& root, uint64_t message_bytes) {
  std::vector<std::vector<uint8_t>> values = {Bytes(kFloats * 4, 1),
                                              Bytes(kFloats * 4, 2)};
  reshard::InProcessHub hub(2, 30000);
  std::vector<ReplicateStats> stats(2);
  std::vector<Status> status(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto own = SavePrimary(root, r, values[r]);
      auto transport = hub.Connect(r);
      ReplicatorOptions o;
      o.root = root;
      o.nodes = {0, 1};
      o.piece_bytes = 1 << 20;
      o.message_bytes = message_bytes;
      Replicator replicator(transport.get(), o);
      status[r] = replicator.Replicate(own.get(), 1, true, &stats[r]);
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(status[r].ok()) << status[r];
    // Rank r's part, on the other node, bit for bit.
    auto copy = statestore::Store::Open(ReplicaStorePath(root, 1 - r, r, 0),
                                        statestore::StoreOptions());
    EXPECT_TRUE(copy.ok()) << copy.status();
    if (!copy.ok()) continue;
    std::vector<uint8_t> back(kFloats * 4);
    EXPECT_TRUE((*copy)->ReadShard(1, "w", r, MutableBytes(back)).ok());
    EXPECT_EQ(back, values[r]) << "rank " << r;
    EXPECT_TRUE((*copy)->Verify(1)->ok());
  }
  return stats[0];
}

TEST(ReplicatorTest, MessagesOfMessageBytesCarryTheWholePart) {
  TempDir small, whole;
  // 64 KiB in messages of 8 KiB: 8 rounds (the header rides in the
  // first); with messages of piece_bytes, one.
  const ReplicateStats many = ReplicateBoth(small.path(), 8192);
  EXPECT_EQ(many.rounds, 8u);
  EXPECT_EQ(many.raw_bytes, static_cast<uint64_t>(kFloats) * 4);
  EXPECT_GT(many.received_bytes, 0u);
  const ReplicateStats one = ReplicateBoth(whole.path(), 0);
  EXPECT_EQ(one.rounds, 1u);
}

}  // namespace
}  // namespace hy::recovery
