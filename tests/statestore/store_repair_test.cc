// Damaged chunks are quarantined (counted and said once, written again by
// the next save that needs them) and Repair writes them again from another
// copy of the store, such as a replica.

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "hy/metrics/hy_metrics.h"
#include "hy/statestore/store.h"
#include "raw_db.h"
#include "store_test_util.h"

namespace hy::statestore {
namespace {

using testing::Bytes;
using testing::Commit;
using testing::DamageChunk;
using testing::SmallChunks;
using testing::TempDir;
using testing::WholeShard;

void SaveOne(Store* store, uint64_t version, const std::vector<uint8_t>& data) {
  ASSERT_TRUE(store
                  ->Save({version,
                          0,
                          {WholeShard("w", DType::kF32,
                                      {int64_t(data.size() / 4)}, data)},
                          {}},
                         nullptr)
                  .ok());
  ASSERT_TRUE(store->Commit(Commit(version)).ok());
}

TEST(StoreRepairTest, DamagedChunkIsQuarantinedCountedAndSaidOnce) {
  TempDir dir;
  const auto data = Bytes(4096 * 20, 5);
  SaveOne(Store::Open(dir.path(), SmallChunks())->get(), 1, data);
  const Hash128 victim = DamageChunk(dir.path(), 4);

  metrics::Registry registry;
  auto m = metrics::HyMetrics::Register(registry);
  ASSERT_TRUE(m.ok());
  std::atomic<int> said{0};
  std::string said_store;
  StoreOptions o = SmallChunks();
  o.metrics = &*m;
  o.on_damaged_chunk = [&](const std::string& store, const Hash128& address,
                           const Status& why) {
    ++said;
    said_store = store;
    EXPECT_EQ(address, victim);
    EXPECT_TRUE(why.IsDataLoss()) << why;
  };
  auto store = *Store::Open(dir.path(), o);
  ASSERT_EQ(store->Verify(1)->bad.size(), 1u);
  ASSERT_EQ(store->Verify(1)->bad.size(), 1u);  // Found again: said once.
  EXPECT_EQ(said.load(), 1);
  EXPECT_EQ(said_store, dir.path());
  EXPECT_EQ(m->damaged_chunks->Value(), 1.0);
  EXPECT_EQ(store->DamagedChunks(), std::vector<Hash128>{victim});

  // The next save that needs the chunk writes it again, unread.
  SaveStats stats;
  ASSERT_TRUE(store
                  ->Save({2,
                          0,
                          {WholeShard("w", DType::kF32,
                                      {int64_t(data.size() / 4)}, data)},
                          {}},
                         &stats)
                  .ok());
  EXPECT_EQ(stats.rewritten_chunks, 1u);
  EXPECT_TRUE(store->DamagedChunks().empty());
  EXPECT_TRUE(store->Verify(1)->bad.empty());
}

TEST(StoreRepairTest, RepairTakesDamagedChunksFromAnotherCopy) {
  TempDir a, b;
  const auto data = Bytes(4096 * 20, 7);
  SaveOne(Store::Open(a.path(), SmallChunks())->get(), 1, data);
  SaveOne(Store::Open(b.path(), SmallChunks())->get(), 1, data);
  const Hash128 victim = DamageChunk(a.path(), 3);
  auto store = *Store::Open(a.path(), SmallChunks());
  StoreOptions ro = SmallChunks();
  ro.read_only = true;
  auto copy = *Store::Open(b.path(), ro);
  auto source = [&](const Hash128& address, uint64_t raw_length,
                    MutableBytes out) {
    return copy->ReadChunk(address, raw_length, out);
  };

  Result<RepairReport> r = store->Repair(source);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->versions_checked, 1u);
  EXPECT_EQ(r->chunks_checked, 20u);
  EXPECT_EQ(r->repaired, std::vector<Hash128>{victim});
  EXPECT_TRUE(r->unrepaired.empty());
  EXPECT_TRUE(store->Verify(1)->bad.empty());
  std::vector<uint8_t> out(data.size());
  ASSERT_TRUE(
      store
          ->ReadRegion(1, "w", {0, int64_t(data.size() / 4)}, MutableBytes(out))
          .ok());
  EXPECT_EQ(out, data);
  store.reset();  // Reopened below: the repair is durable.
  store = *Store::Open(a.path(), SmallChunks());
  EXPECT_TRUE(store->Verify(1)->bad.empty());

  // A chunk damaged in both copies stays damaged and is reported.
  store.reset();
  copy.reset();
  const Hash128 both = DamageChunk(a.path(), 9);
  EXPECT_EQ(DamageChunk(b.path(), 9), both);
  store = *Store::Open(a.path(), SmallChunks());
  copy = *Store::Open(b.path(), ro);
  r = store->Repair(source);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->repaired.empty());
  ASSERT_EQ(r->unrepaired.size(), 1u);
  EXPECT_EQ(r->unrepaired[0].address, both);
  EXPECT_TRUE(r->unrepaired[0].status.IsDataLoss()) << r->unrepaired[0].status;
  EXPECT_EQ(store->Verify(1)->bad.size(), 1u);
}

}  // namespace
}  // namespace hy::statestore
