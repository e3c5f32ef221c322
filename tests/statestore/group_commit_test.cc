// Two-phase commit across per-rank stores, with four real processes: each
// rank is a forked process that owns its store; nothing is shared but the
// file system.

#include "hy/statestore/group_commit.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "store_test_util.h"

namespace hy::statestore {
namespace {

using testing::Bytes;
using testing::TempDir;

constexpr int kWorld = 4;
constexpr int kRefused = 10;  // Exit code: commit refused, as expected.
constexpr int kAborted = 11;  // Exit code: follower saw the abort.

std::string RankPath(const std::string& root, int rank) {
  return root + "/rank-" + std::to_string(rank);
}

// The part of version v that `rank` holds: a quarter of a flat tensor.
std::vector<uint8_t> Quarter(uint64_t v, int rank) {
  return Bytes(4096, v * 100 + rank);
}

Status SaveQuarter(Store* store, uint64_t v, int rank) {
  const auto data = Quarter(v, rank);
  SavePart p;
  p.version = v;
  p.rank = rank;
  ShardData s;
  s.meta = TensorMeta{"w", DType::kU8, {4096 * kWorld}};
  s.geometry = ShardGeometry::FromRuns({FlatRun{rank * 4096, 4096}});
  s.data = ConstBytes(data);
  p.shards.push_back(s);
  return store->Save(p, nullptr);
}

CommitRecord Record(uint64_t v, int rank) {
  CommitRecord c;
  c.version = v;
  c.step = v;
  c.world_size = kWorld;
  c.ranks = {rank};
  c.layout = "fsdp=4";
  return c;
}

// One rank's process. Version 1: every rank prepares and it commits.
// Version 2: rank 3 has "died" and never prepares, so it must not commit.
[[noreturn]] void Rank(const std::string& root, int rank) {
  auto opened = Store::Open(RankPath(root, rank), testing::SmallChunks());
  if (!opened.ok()) _exit(2);
  std::unique_ptr<Store> store = std::move(opened).value();
  std::vector<PeerStore> peers;
  for (int r = 1; r < kWorld; ++r) peers.push_back({r, RankPath(root, r)});
  const auto kLong = std::chrono::milliseconds(30000);
  const auto kShort = std::chrono::milliseconds(1500);

  if (!SaveQuarter(store.get(), 1, rank).ok()) _exit(3);
  Status s = rank == 0
                 ? CommitAcrossStores(store.get(), Record(1, 0), peers, kLong)
                 : FollowCommit(store.get(), rank, RankPath(root, 0), 1, kLong);
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d, version 1: %s\n", rank,
                 s.ToString().c_str());
    _exit(4);
  }
  if (rank == 3) _exit(0);  // Gone before version 2.

  if (!SaveQuarter(store.get(), 2, rank).ok()) _exit(5);
  if (rank == 0) {
    s = CommitAcrossStores(store.get(), Record(2, 0), peers, kShort);
    _exit(s.code() == StatusCode::kUnavailable &&
                  s.message().find("ranks 3 did not prepare") !=
                      std::string_view::npos
              ? kRefused
              : 6);
  }
  // Followers wait longer than the coordinator, so they see its decision.
  s = FollowCommit(store.get(), rank, RankPath(root, 0), 2, kLong);
  _exit(s.code() == StatusCode::kAborted ? kAborted : 7);
}

TEST(GroupCommitTest, FourProcessesCommitOnlyWhenEveryRankPrepared) {
  TempDir dir;
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kWorld; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) Rank(dir.path(), rank);
    pids.push_back(pid);
  }
  const int want[kWorld] = {kRefused, kAborted, kAborted, 0};
  for (int rank = 0; rank < kWorld; ++rank) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[rank], &status, 0), pids[rank]);
    ASSERT_TRUE(WIFEXITED(status)) << "rank " << rank;
    EXPECT_EQ(WEXITSTATUS(status), want[rank]) << "rank " << rank;
  }

  // Every store: version 1 committed with its own quarter; version 2 never.
  for (int rank = 0; rank < kWorld; ++rank) {
    StoreOptions ro = testing::SmallChunks();
    ro.read_only = true;
    auto store = *Store::Open(RankPath(dir.path(), rank), ro);
    auto versions = *store->ListVersions();
    ASSERT_GE(versions.size(), 1u);
    EXPECT_TRUE(versions[0].committed) << "rank " << rank;
    EXPECT_EQ(versions[0].commit.ranks, std::vector<int>{rank});
    EXPECT_EQ(*store->LatestCommitted(), 1u) << "rank " << rank;
    EXPECT_TRUE(store->ReadManifest(2).status().IsNotFound())
        << "rank " << rank;
    if (rank < 3) {  // Aborted everywhere it was prepared; parts dropped.
      ASSERT_EQ(versions.size(), 2u);
      EXPECT_FALSE(versions[1].committed);
      EXPECT_TRUE(versions[1].aborted);
      EXPECT_TRUE(versions[1].prepared.empty());
    } else {
      EXPECT_EQ(versions.size(), 1u);
    }
    std::vector<uint8_t> mine(4096);
    ASSERT_TRUE(
        store->ReadRegion(1, "w", {rank * 4096, 4096}, MutableBytes(mine))
            .ok());
    EXPECT_EQ(mine, Quarter(1, rank));
    // A node's store holds only its own shard.
    const int other = (rank + 1) % kWorld;
    EXPECT_TRUE(
        store->ReadRegion(1, "w", {other * 4096, 4096}, MutableBytes(mine))
            .IsDataLoss());
  }
}

// A follower that gave up waiting keeps its prepared part, even through Gc,
// until it learns the outcome: the coordinator may commit after all.
TEST(GroupCommitTest, FollowerKeepsAnUndecidedPartThroughGc) {
  TempDir dir;
  auto coordinator =
      *Store::Open(RankPath(dir.path(), 0), testing::SmallChunks());
  auto follower = *Store::Open(RankPath(dir.path(), 1), testing::SmallChunks());
  const std::vector<PeerStore> peers = {{1, RankPath(dir.path(), 1)}};
  const auto kWait = std::chrono::milliseconds(10000);

  ASSERT_TRUE(SaveQuarter(follower.get(), 1, 1).ok());
  Status s = FollowCommit(follower.get(), 1, RankPath(dir.path(), 0), 1,
                          std::chrono::milliseconds(100));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  // The coordinator gets there late, then both commit version 2 normally.
  ASSERT_TRUE(SaveQuarter(coordinator.get(), 1, 0).ok());
  ASSERT_TRUE(
      CommitAcrossStores(coordinator.get(), Record(1, 0), peers, kWait).ok());
  ASSERT_TRUE(SaveQuarter(coordinator.get(), 2, 0).ok());
  ASSERT_TRUE(SaveQuarter(follower.get(), 2, 1).ok());
  ASSERT_TRUE(
      CommitAcrossStores(coordinator.get(), Record(2, 0), peers, kWait).ok());
  ASSERT_TRUE(
      FollowCommit(follower.get(), 1, RankPath(dir.path(), 0), 2, kWait).ok());

  GcOptions gc;
  gc.keep_last = 2;
  ASSERT_TRUE(follower->Gc(gc).ok());
  ASSERT_TRUE(
      FollowCommit(follower.get(), 1, RankPath(dir.path(), 0), 1, kWait).ok());
  std::vector<uint8_t> mine(4096);
  ASSERT_TRUE(
      follower->ReadRegion(1, "w", {4096, 4096}, MutableBytes(mine)).ok());
  EXPECT_EQ(mine, Quarter(1, 1));
  // Calling again once done is fine (a restarted follower does).
  EXPECT_TRUE(
      FollowCommit(follower.get(), 1, RankPath(dir.path(), 0), 1, kWait).ok());
}

}  // namespace
}  // namespace hy::statestore
