// StoreOptions::run_id: a store records the run it belongs to, and a job
// of another run cannot open it (to resume or garbage-collect) unless it
// asks to take it over.

#include <gtest/gtest.h>

#include <string>

#include "hy/statestore/store.h"
#include "store_test_util.h"

namespace hy::statestore {
namespace {

Result<std::unique_ptr<Store>> OpenAs(const std::string& path,
                                      const std::string& run,
                                      bool allow = false,
                                      bool read_only = false) {
  StoreOptions o;
  o.run_id = run;
  o.allow_other_run = allow;
  o.read_only = read_only;
  return Store::Open(path, o);
}

TEST(StoreRunIdTest, NewStoreRecordsItsRunAndRefusesAnother) {
  testing::TempDir dir;
  const std::string path = dir.Sub("s");
  {
    auto s = OpenAs(path, "job-a");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ((*s)->run_id(), "job-a");
  }
  // Same run again: fine, also read-only and with no claim at all.
  EXPECT_TRUE(OpenAs(path, "job-a").ok());
  auto plain = OpenAs(path, "", false, /*read_only=*/true);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->run_id(), "job-a");
  plain->reset();
  // Another run: refused, naming both, writable or not.
  for (bool ro : {false, true}) {
    auto other = OpenAs(path, "job-b", false, ro);
    ASSERT_FALSE(other.ok());
    EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
    const std::string msg(other.status().message());
    EXPECT_NE(msg.find("job-a"), std::string::npos) << msg;
    EXPECT_NE(msg.find("job-b"), std::string::npos) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
  // Read-only with permission: opens, still job-a's.
  auto peek = OpenAs(path, "job-b", true, /*read_only=*/true);
  ASSERT_TRUE(peek.ok()) << peek.status().ToString();
  EXPECT_EQ((*peek)->run_id(), "job-a");
  peek->reset();
  // Taken over explicitly: now job-b's, and job-a is refused.
  auto taken = OpenAs(path, "job-b", true);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ((*taken)->run_id(), "job-b");
  taken->reset();
  EXPECT_FALSE(OpenAs(path, "job-a").ok());
}

TEST(StoreRunIdTest, UnclaimedStoreIsAdopted) {
  testing::TempDir dir;
  const std::string path = dir.Sub("s");
  {
    auto s = OpenAs(path, "");  // Created without a run (older hy).
    ASSERT_TRUE(s.ok());
    EXPECT_EQ((*s)->run_id(), "");
  }
  {
    auto s = OpenAs(path, "job-c", false, /*read_only=*/true);
    ASSERT_TRUE(s.ok());  // Nothing to refuse; a reader records nothing.
    EXPECT_EQ((*s)->run_id(), "");
  }
  ASSERT_TRUE(OpenAs(path, "job-c").ok());
  auto again = OpenAs(path, "");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->run_id(), "job-c");
  again->reset();
  EXPECT_FALSE(OpenAs(path, "job-d").ok());
}

}  // namespace
}  // namespace hy::statestore
