// hy::recovery retention on real stores: versions of a superseded
// generation go from every store (and stores left empty go) only once the
// live generation has a committed, replicated version; never before.

#include "hy/recovery/retention.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "hy/recovery/catalog.h"
#include "hy/recovery/node_layout.h"
#include "recovery/save_run.h"
#include "statestore/store_test_util.h"

namespace hy::recovery {
namespace {

namespace fs = std::filesystem;
using statestore::testing::TempDir;
using testing::kNumel;
using testing::SaveRun;
using testing::ShardOf;

// The versions a store holds committed.
std::set<uint64_t> Committed(const std::string& path) {
  statestore::StoreOptions o;
  o.read_only = true;
  o.create_if_missing = false;
  auto store = statestore::Store::Open(path, o);
  EXPECT_TRUE(store.ok()) << path << ": " << store.status();
  std::set<uint64_t> out;
  if (!store.ok()) return out;
  Result<std::vector<statestore::VersionInfo>> versions =
      (*store)->ListVersions();
  EXPECT_TRUE(versions.ok()) << versions.status();
  if (!versions.ok()) return out;
  for (const auto& v : *versions) {
    if (v.committed) out.insert(v.version);
  }
  return out;
}

// Rank `rank` of a world of 2 writes its part of `version` into the store
// at `path` and commits it there, as group commit leaves a per-rank store
// (primary or replica).
void WritePart(const std::string& path, uint64_t version, int rank) {
  auto store = statestore::Store::Open(path, {});
  ASSERT_TRUE(store.ok()) << store.status();
  const FlatRun run = ShardOf(rank, 2, kNumel);
  std::vector<float> data(run.length, 1.5f);
  statestore::SavePart part;
  part.version = version;
  part.rank = rank;
  statestore::ShardData d;
  d.meta = {"actor/w", DType::kF32, {kNumel}};
  d.geometry = ShardGeometry::FromRuns({run});
  d.data = ConstBytes(data.data(), data.size() * 4);
  part.shards.push_back(d);
  ASSERT_TRUE((*store)->Save(part, nullptr).ok());
  statestore::CommitRecord c;
  c.version = version;
  c.step = VersionStep(version);
  c.world_size = 2;
  c.ranks = {rank};
  ASSERT_TRUE((*store)->Commit(c).ok());
}

Result<RootRetention> Plan(const std::string& root, size_t keep = 1) {
  std::vector<int> nodes;
  HY_ASSIGN_OR_RETURN(Catalog catalog, Catalog::ScanRoot(root, &nodes));
  return PlanRootRetention(catalog, nodes, keep, -1, {});
}

Status Apply(const std::string& root, const RetentionPolicy& policy) {
  HY_ASSIGN_OR_RETURN(std::vector<StoreLocation> stores, ListRootStores(root));
  HY_RETURN_IF_ERROR(ApplyRetention(stores, policy, "", nullptr));
  return RemoveEmptyNodes(root, {0, 2}).status();
}

// Generation 0 ran on nodes 0 and 1 (steps 4, 8; one replica each); node 1
// is lost; generation 1 runs on nodes 0 and 2.
class RetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SaveRun(root_, 2, {4, 8}, {0, 1});
    fs::remove_all(NodeDir(root_, 1));
    ASSERT_EQ(Committed(ReplicaStorePath(root_, 0, 1)),
              (std::set<uint64_t>{MakeVersion(4, 0), MakeVersion(8, 0)}));
  }
  TempDir dir_;
  const std::string root_ = dir_.Sub("run");
};

TEST_F(RetentionTest, OfflineGcKeepsTheOldGenerationUntilTheNewIsReplicated) {
  // Generation 1 committed step 12 on both ranks, not yet replicated.
  const uint64_t v12 = MakeVersion(12, 1);
  WritePart(PrimaryStorePath(root_, 0), v12, 0);
  WritePart(PrimaryStorePath(root_, 2), v12, 1);
  Result<RootRetention> plan = Plan(root_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->policy.live_generation, 1u);
  EXPECT_EQ(plan->replicas, 1);
  EXPECT_EQ(plan->policy.safe_version, 0u);
  EXPECT_NE(plan->why_unsafe.find("rank(s) 0,1"), std::string::npos)
      << plan->why_unsafe;
  ASSERT_TRUE(Apply(root_, plan->policy).ok());
  // Node 1's only copy left (its replica on node 0) and rank 0's step 8
  // stay: generation 0's step 8 is still recoverable.
  EXPECT_EQ(Committed(ReplicaStorePath(root_, 0, 1)),
            (std::set<uint64_t>{MakeVersion(4, 0), MakeVersion(8, 0)}));
  EXPECT_EQ(Committed(PrimaryStorePath(root_, 0)),
            (std::set<uint64_t>{MakeVersion(4, 0), MakeVersion(8, 0), v12}));

  // Replicated: now generation 0 is superseded everywhere.
  WritePart(ReplicaStorePath(root_, 2, 0), v12, 0);
  WritePart(ReplicaStorePath(root_, 0, 2), v12, 1);
  plan = Plan(root_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->policy.safe_version, v12);
  ASSERT_TRUE(Apply(root_, plan->policy).ok());
  EXPECT_FALSE(fs::exists(ReplicaStorePath(root_, 0, 1)));
  EXPECT_EQ(Committed(PrimaryStorePath(root_, 0)), std::set<uint64_t>{v12});
  std::vector<int> nodes;
  auto catalog = Catalog::ScanRoot(root_, &nodes);
  ASSERT_TRUE(catalog.ok());
  for (const CopyEntry& e : catalog->entries()) {
    EXPECT_EQ(VersionGeneration(e.version), 1u) << e.where.path;
  }
}

TEST_F(RetentionTest,
       TrainerDropsTheOldGenerationOnceItsFirstStepIsReplicated) {
  // Generation 1 through the Checkpointer: its commits replicate, then
  // retire generation 0 from its own stores and sweep the stale ones.
  SaveRun(root_, 2, {8, 12}, {0, 2}, 0, /*generation=*/1);
  EXPECT_FALSE(fs::exists(ReplicaStorePath(root_, 0, 1)));  // Stale: gone.
  EXPECT_EQ(Committed(PrimaryStorePath(root_, 0)),
            (std::set<uint64_t>{MakeVersion(8, 1), MakeVersion(12, 1)}));
  EXPECT_EQ(Committed(ReplicaStorePath(root_, 0, 2)),
            (std::set<uint64_t>{MakeVersion(8, 1), MakeVersion(12, 1)}));
  // Offline, --keep 1 counts the live generation's versions: step 8 goes.
  Result<RootRetention> plan = Plan(root_, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->policy.safe_version, MakeVersion(12, 1));
  ASSERT_TRUE(Apply(root_, plan->policy).ok());
  EXPECT_EQ(Committed(PrimaryStorePath(root_, 0)),
            std::set<uint64_t>{MakeVersion(12, 1)});
}

}  // namespace
}  // namespace hy::recovery
