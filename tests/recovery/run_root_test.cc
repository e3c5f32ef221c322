// hy::recovery::RunRoot on real stores that checkpoint::Checkpointer wrote:
// what a path names, a root's nodes, stores and committed steps, two runs
// under one root, and dropping steps from every copy.

#include "hy/recovery/run_root.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hy/recovery/run_identity.h"
#include "recovery/save_run.h"
#include "statestore/store_test_util.h"

namespace hy::recovery {
namespace {

namespace fs = std::filesystem;
using statestore::testing::TempDir;
using testing::SaveRun;

class RunRootTest : public ::testing::Test {
 protected:
  TempDir dir_;
  std::string root_ = dir_.path() + "/run";
};

TEST_F(RunRootTest, NamesWhatAPathIs) {
  SaveRun(root_, 2, {1});
  const std::string store = root_ + "/node-1/store";
  const std::string lone = dir_.path() + "/lone";
  ASSERT_TRUE(statestore::Store::Open(lone, {}).ok());
  fs::create_directories(dir_.path() + "/empty");

  EXPECT_EQ(RunRoot::Classify(root_), PathKind::kRunRoot);
  EXPECT_EQ(RunRoot::Classify(store), PathKind::kRunStore);
  EXPECT_EQ(RunRoot::Classify(store + "/"), PathKind::kRunStore);
  EXPECT_EQ(RunRoot::Classify(lone), PathKind::kStore);
  EXPECT_EQ(RunRoot::Classify(dir_.path() + "/empty"), PathKind::kOther);
  EXPECT_EQ(RunRoot::Classify(dir_.path() + "/nothing"), PathKind::kMissing);
  EXPECT_EQ(RunRoot::Enclosing(store), root_);
  EXPECT_EQ(RunRoot::Enclosing(lone), "");

  ASSERT_TRUE(RunRoot::Open(root_).ok());
  Result<RunRoot> in_root = RunRoot::Open(store);
  ASSERT_TRUE(in_root.status().IsInvalidArgument()) << in_root.status();
  EXPECT_NE(in_root.status().ToString().find("pass the run root " + root_),
            std::string::npos)
      << in_root.status();
  EXPECT_TRUE(RunRoot::Open(lone).status().IsInvalidArgument());
  EXPECT_TRUE(RunRoot::Open(dir_.path() + "/empty").status().IsNotFound());
  EXPECT_TRUE(RunRoot::Open(dir_.path() + "/nothing").status().IsNotFound());
}

TEST_F(RunRootTest, ListsNodesStoresAndCommittedSteps) {
  SaveRun(root_, 2, {1, 2, 3});
  Result<RunRoot> root = RunRoot::Open(root_);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(*root->Nodes(), (std::vector<int>{0, 1}));
  Result<std::vector<StoreLocation>> stores = root->Stores();
  ASSERT_TRUE(stores.ok()) << stores.status();
  int primaries = 0, replicas = 0;
  for (const StoreLocation& s : *stores) {
    (s.replica ? replicas : primaries)++;
    EXPECT_TRUE(fs::exists(s.path)) << s.path;
  }
  EXPECT_EQ(primaries, 2);
  EXPECT_EQ(replicas, 2);  // One replica of each node's part.
  Result<RunRootScan> scan = root->Scan();
  ASSERT_TRUE(scan.ok()) << scan.status();
  EXPECT_EQ(scan->nodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(scan->CommittedSteps(), (std::set<uint64_t>{1, 2, 3}));
  EXPECT_TRUE(scan->catalog.unreadable().empty());
  EXPECT_EQ(*root->RunId(), "");  // SaveRun records no run.
}

TEST_F(RunRootTest, RefusesStoresOfTwoRunsUnlessAllowed) {
  SaveRun(root_, 2, {1});
  ASSERT_TRUE(ClaimNodeStores(root_, 0, "run-a", false).ok());
  ASSERT_TRUE(ClaimNodeStores(root_, 1, "run-b", false).ok());
  Result<RunRoot> root = RunRoot::Open(root_);
  ASSERT_TRUE(root.ok());
  Result<std::string> id = root->RunId();
  ASSERT_EQ(id.status().code(), StatusCode::kFailedPrecondition) << id.status();
  const std::string msg = id.status().ToString();
  EXPECT_NE(msg.find("run-a"), std::string::npos) << msg;
  EXPECT_NE(msg.find("run-b"), std::string::npos) << msg;
  EXPECT_NE(msg.find("move the other run's node directories"),
            std::string::npos)
      << msg;
  // Scan opens each store once and says the same as RunId.
  const Status scan = root->Scan().status();
  EXPECT_EQ(scan.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(scan.ToString(), msg);
  Result<RunRootScan> anyway = root->Scan(/*allow_other_run=*/true);
  ASSERT_TRUE(anyway.ok()) << anyway.status();
  EXPECT_EQ(anyway->CommittedSteps(), (std::set<uint64_t>{1}));
}

// OneRunId: stores that record no run claim nothing; two runs name both
// stores.
TEST(OneRunIdTest, ClaimsOnlyWhatStoresRecord) {
  EXPECT_EQ(*OneRunId("/r", {}), "");
  EXPECT_EQ(*OneRunId("/r", {{"/r/a", ""}, {"/r/b", "x"}, {"/r/c", ""}}), "x");
  EXPECT_EQ(*OneRunId("/r", {{"/r/a", "x"}, {"/r/b", "x"}}), "x");
  const Result<std::string> two =
      OneRunId("/r", {{"/r/a", "x"}, {"/r/b", ""}, {"/r/c", "y"}});
  ASSERT_EQ(two.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(two.status().message(),
            "stores of two runs under /r: /r/a is run 'x', /r/c is run 'y'");
}

TEST_F(RunRootTest, DropsStepsFromEveryCopyAndNamesAStoreHeldOpen) {
  SaveRun(root_, 2, {1, 2, 3});
  Result<RunRoot> root = RunRoot::Open(root_);
  ASSERT_TRUE(root.ok());
  std::vector<DroppedStore> dropped;
  ASSERT_TRUE(
      root->DropSteps([](uint64_t s) { return s == 2; }, &dropped).ok());
  EXPECT_EQ(dropped.size(), 4u);  // Both primaries and both replicas.
  for (const DroppedStore& d : dropped) {
    ASSERT_EQ(d.report.dropped_versions.size(), 1u) << d.where.path;
    EXPECT_EQ(VersionStep(d.report.dropped_versions[0]), 2u);
  }
  EXPECT_EQ(root->Scan()->CommittedSteps(), (std::set<uint64_t>{1, 3}));

  // A store some writer holds: the drop stops there, naming it, and says
  // what it did before.
  Result<std::vector<StoreLocation>> stores = root->Stores();
  ASSERT_TRUE(stores.ok());
  const std::string held = stores->back().path;
  auto writer = statestore::Store::Open(held, {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  dropped.clear();
  Status s = root->DropSteps([](uint64_t s) { return s == 1; }, &dropped);
  ASSERT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.ToString().find(held), std::string::npos) << s;
  EXPECT_NE(s.ToString().find("open in another process"), std::string::npos)
      << s;
  EXPECT_EQ(dropped.size(), stores->size() - 1);
  writer->reset();
  EXPECT_EQ(root->Scan()->Steps(), (std::set<uint64_t>{1, 3}));
}

}  // namespace
}  // namespace hy::recovery
