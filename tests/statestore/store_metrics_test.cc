// Saves and commits record the hy_checkpoint_* metrics.

#include <gtest/gtest.h>

#include "hy/metrics/hy_metrics.h"
#include "hy/statestore/store.h"
#include "store_test_util.h"

namespace hy::statestore {
namespace {

using testing::Bytes;
using testing::Commit;
using testing::TempDir;
using testing::WholeShard;

TEST(StoreMetricsTest, SavesAndCommitsAreRecorded) {
  metrics::Registry registry;
  Result<metrics::HyMetrics> m = metrics::HyMetrics::Register(registry);
  ASSERT_TRUE(m.ok()) << m.status();
  TempDir dir;
  StoreOptions o = testing::SmallChunks();
  o.metrics = &*m;
  auto store = *Store::Open(dir.path(), o);

  const auto a = Bytes(40000, 1);
  SaveStats s1, s2;
  ASSERT_TRUE(
      store->Save({1, 0, {WholeShard("w", DType::kU8, {40000}, a)}, {}}, &s1)
          .ok());
  ASSERT_TRUE(store->Commit(Commit(1)).ok());  // Step 10.
  ASSERT_TRUE(
      store->Save({2, 0, {WholeShard("w", DType::kU8, {40000}, a)}, {}}, &s2)
          .ok());
  ASSERT_TRUE(store->Commit(Commit(2)).ok());  // Step 20; no new chunk.

  EXPECT_EQ(metrics::Count(*m->checkpoint_save_duration), 2u);
  EXPECT_EQ(metrics::Count(*m->checkpoint_commit_duration), 2u);
  EXPECT_GT(metrics::Sum(*m->checkpoint_save_duration), 0.0);
  EXPECT_EQ(m->checkpoint_logical_bytes->Value(), 80000.0);
  EXPECT_EQ(m->checkpoint_written_bytes->Value(),
            static_cast<double>(s1.new_bytes + s2.new_bytes));
  EXPECT_EQ(s2.new_bytes, 0u);
  EXPECT_EQ(m->checkpoint_last_committed_step->Value(), 20.0);

  // A refused commit changes no gauge.
  ASSERT_FALSE(store->Commit(Commit(3)).ok());
  EXPECT_EQ(m->checkpoint_last_committed_step->Value(), 20.0);
}

}  // namespace
}  // namespace hy::statestore
