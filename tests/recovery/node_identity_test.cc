// Node ids from host identity (hy/recovery/node_identity.h).

#include "hy/recovery/node_identity.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "hy/recovery/node_layout.h"
#include "statestore/store_test_util.h"

namespace hy::recovery {
namespace {

using statestore::testing::TempDir;

NodeReport Host(const std::string& key, int group = -1, int found = -1,
                int max_seen = -1) {
  NodeReport r;
  r.key = "host:" + key;
  r.hostname = key;
  r.group = group;
  r.found = found;
  r.max_seen = max_seen;
  return r;
}

TEST(NodeIdentityTest, RanksOfOneHostShareANode) {
  // A fresh run: 3 hosts x 2 ranks get nodes 0, 1, 2 in rank order.
  auto nodes =
      AssignNodesByIdentity({Host("a", 0), Host("a", 0), Host("b", 1),
                             Host("b", 1), Host("c", 2), Host("c", 2)});
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(*nodes, (std::vector<int>{0, 0, 1, 1, 2, 2}));
}

TEST(NodeIdentityTest, RestartFindsNodesByIdentityNotByListing) {
  // Host c (node 2) was lost and a new host d joined; torchrun gave the
  // agents new group ranks in another order. b and a keep their nodes; d
  // gets a fresh id above every id seen (3), never node 2.
  auto nodes = AssignNodesByIdentity(
      {Host("b", 0, 1, 2), Host("d", 1, -1, -1), Host("a", 2, 0, 2)});
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(*nodes, (std::vector<int>{1, 3, 0}));
}

TEST(NodeIdentityTest, ExplicitNodeIdsWin) {
  NodeReport a = Host("x");
  a.key = "node-5";
  a.hint = 5;
  NodeReport b = Host("x");
  b.key = "node-1";
  b.hint = 1;
  auto nodes = AssignNodesByIdentity({a, b, Host("y")});
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(*nodes, (std::vector<int>{5, 1, 6}));
}

TEST(NodeIdentityTest, ConflictsAreRefused) {
  // One torchrun agent, two identities.
  auto split = AssignNodesByIdentity({Host("a", 0), Host("b", 0)});
  EXPECT_EQ(split.status().code(), StatusCode::kFailedPrecondition);
  // One hostname, two disks that disagree.
  auto disks = AssignNodesByIdentity({Host("a", 0, 0), Host("a", 1, 3)});
  EXPECT_EQ(disks.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(disks.status().message().find("HY_HOST_ID"), std::string::npos);
  // An explicit id that another host's directory holds.
  NodeReport hinted = Host("z");
  hinted.key = "node-0";
  hinted.hint = 0;
  auto clash = AssignNodesByIdentity({hinted, Host("a", -1, 0)});
  EXPECT_EQ(clash.status().code(), StatusCode::kFailedPrecondition);
}

TEST(NodeIdentityTest, ReportFindsTheRecordedHost) {
  TempDir dir;
  setenv("HY_HOST_ID", "rack7-host3", 1);
  unsetenv("HY_NODE_ID");
  auto fresh = ReportNode(dir.path() + "/run");
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->key, "host:rack7-host3");
  EXPECT_EQ(fresh->found, -1);
  EXPECT_EQ(fresh->max_seen, -1);
  ASSERT_TRUE(RecordHost(dir.path() + "/run", 4, *fresh).ok());
  // Another host's directory, holding a replica of a node 9 that is gone.
  NodeReport other = *fresh;
  other.key = "host:elsewhere";
  ASSERT_TRUE(RecordHost(dir.path() + "/run", 2, other).ok());
  std::filesystem::create_directories(
      ReplicaStorePath(dir.path() + "/run", 2, 9, 1));
  auto again = ReportNode(dir.path() + "/run");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->found, 4);
  EXPECT_EQ(again->max_seen, 9);
  EXPECT_EQ(RecordedHostname(dir.path() + "/run", 4), fresh->hostname);
  setenv("HY_NODE_ID", "x1", 1);
  EXPECT_EQ(ReportNode(dir.path()).status().code(),
            StatusCode::kInvalidArgument);
  unsetenv("HY_NODE_ID");
  unsetenv("HY_HOST_ID");
}

TEST(NodeLayoutTest, SlotsNameTheirOwnStores) {
  TempDir dir;
  const std::vector<int> nodes = {3, 3, 1, 3};
  EXPECT_EQ(SlotOf(3, nodes), 2);
  EXPECT_EQ(RanksOnNode(3, nodes), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(CountNodes(nodes), 2);
  const std::string root = dir.path();
  for (const std::string& p :
       {PrimaryStorePath(root, 3, 0), PrimaryStorePath(root, 3, 2),
        ReplicaStorePath(root, 3, 1, 0), ReplicaStorePath(root, 3, 1, 1)}) {
    std::filesystem::create_directories(p);
  }
  std::filesystem::create_directories(root + "/node-3/store-x");
  std::filesystem::create_directories(root + "/node-3/replica-1-0");
  auto stores = ListNodeStores(root, 3);
  ASSERT_TRUE(stores.ok());
  ASSERT_EQ(stores->size(), 4u);
  EXPECT_EQ((*stores)[1].path, root + "/node-3/store-2");
  EXPECT_EQ((*stores)[1].slot, 2);
  EXPECT_FALSE((*stores)[1].replica);
  EXPECT_EQ((*stores)[3].path, root + "/node-3/replica-1-1");
  EXPECT_EQ((*stores)[3].source_node, 1);
  EXPECT_EQ((*stores)[3].slot, 1);
  EXPECT_EQ(WorkerPidPath(root, 3, 1), root + "/node-3/worker-1.pid");
}

}  // namespace
}  // namespace hy::recovery
