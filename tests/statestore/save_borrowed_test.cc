// Store::SaveBorrowed: the shards are read in place after the call returns
// (no copy, no staging memory), the blobs are copied, the stored version
// holds the values the buffers had until WaitRead, and a save that fails
// still lets the buffers go; after_chunk_read sees every pass over the
// caller's own bytes, chunk by chunk, and none over a staged copy.

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "store_test_util.h"

namespace hy::statestore {
namespace {

using testing::Bytes;
using testing::Commit;
using testing::SmallChunks;
using testing::TempDir;
using testing::WholeShard;

std::vector<uint8_t> ReadShard(Store* store, uint64_t v,
                               const std::string& name, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  Status s = store->ReadRegion(
      v, name, FlatRun{0, static_cast<int64_t>(bytes / 4)}, MutableBytes(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(SaveBorrowedTest, ReadsInPlaceWithoutStagingAndCopiesBlobs) {
  TempDir dir;
  StoreOptions o = SmallChunks();
  o.staging_bytes = 64;  // Far below the shards: nothing of them is copied.
  auto store = std::move(Store::Open(dir.path(), o)).value();
  std::vector<std::vector<uint8_t>> live = {Bytes(400000, 1), Bytes(120000, 2)};
  const auto at_save = live;
  SavePart part{1, 0, {}, {}};
  part.shards.push_back(WholeShard("a", DType::kF32, {100000}, live[0]));
  part.shards.push_back(WholeShard("b", DType::kF32, {30000}, live[1]));
  std::string blob = "trainer state";
  BlobData state;
  state.name = "state";
  state.data = ConstBytes(blob);
  part.blobs.push_back(state);
  auto h = store->SaveBorrowed(std::move(part));
  ASSERT_TRUE(h.ok()) << h.status();
  blob.assign(blob.size(), 'x');  // Blobs are the caller's again at once.
  (*h)->WaitRead();
  (*h)->WaitRead();  // Idempotent.
  // The next optimizer step writes the tensors while the save goes on.
  for (auto& b : live) b.assign(b.size(), 0);
  SaveStats st;
  ASSERT_TRUE((*h)->Wait(&st).ok());
  EXPECT_TRUE((*h)->Done());
  EXPECT_EQ(st.logical_bytes, 520000u);
  ASSERT_TRUE(store->Commit(Commit(1)).ok());
  EXPECT_EQ(ReadShard(store.get(), 1, "a", 400000), at_save[0]);
  EXPECT_EQ(ReadShard(store.get(), 1, "b", 120000), at_save[1]);
  auto read_blob = store->ReadBlob(1, "state");
  ASSERT_TRUE(read_blob.ok()) << read_blob.status();
  EXPECT_EQ(*read_blob, "trainer state");
}

TEST(SaveBorrowedTest, AFailedSaveStillLetsTheBuffersGo) {
  TempDir dir;
  auto store = std::move(Store::Open(dir.path(), SmallChunks())).value();
  std::vector<uint8_t> live = Bytes(40000, 3);
  SavePart first{1, 0, {WholeShard("w", DType::kF32, {10000}, live)}, {}};
  ASSERT_TRUE(store->Save(first, nullptr).ok());
  // The same (version, rank) again fails in the background: WaitRead
  // returns all the same, and Wait gives the error.
  auto h = store->SaveBorrowed(
      {1, 0, {WholeShard("w", DType::kF32, {10000}, live)}, {}});
  ASSERT_TRUE(h.ok()) << h.status();
  (*h)->WaitRead();
  EXPECT_EQ((*h)->Wait(nullptr).code(), StatusCode::kAlreadyExists);
  // A malformed part is refused at the call, before anything is read.
  auto bad = store->SaveBorrowed(
      {2, 0, {WholeShard("w", DType::kF32, {10001}, live)}, {}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status();
}

TEST(SaveBorrowedTest, SaveAsyncHandlesAreReadAtOnce) {
  TempDir dir;
  auto store = std::move(Store::Open(dir.path(), SmallChunks())).value();
  std::vector<uint8_t> live = Bytes(40000, 4);
  auto h = store->SaveAsync(
      {1, 0, {WholeShard("w", DType::kF32, {10000}, live)}, {}});
  ASSERT_TRUE(h.ok()) << h.status();
  (*h)->WaitRead();  // Copied before SaveAsync returned.
  ASSERT_TRUE((*h)->Wait(nullptr).ok());
}

// Counts the calls of a shard's after_chunk_read by (offset, length) into
// its buffer; the store calls it from several threads.
class ChunkReads {
 public:
  explicit ChunkReads(const std::vector<uint8_t>& buffer) : base_(buffer) {}
  std::function<void(ConstBytes)> Hook() {
    return [this](ConstBytes chunk) {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_[{chunk.data() - base_.data(), chunk.size()}];
    };
  }
  // The calls so far, forgotten.
  std::map<std::pair<ptrdiff_t, size_t>, int> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(calls_, {});
  }

 private:
  const std::vector<uint8_t>& base_;
  std::mutex mu_;
  std::map<std::pair<ptrdiff_t, size_t>, int> calls_;
};

// Each of the 4096-byte chunks of a 10000-byte buffer, `times` times.
std::map<std::pair<ptrdiff_t, size_t>, int> EachChunk(int times) {
  return {{{0, 4096}, times}, {{4096, 4096}, times}, {{8192, 1808}, times}};
}

TEST(SaveBorrowedTest, ChunkHooksSeeEveryPassOverTheCallersBytes) {
  TempDir dir;
  StoreOptions o = SmallChunks();
  o.staging_bytes = 64;
  auto store = std::move(Store::Open(dir.path(), o)).value();
  const std::vector<uint8_t> live = Bytes(10000, 5);
  ChunkReads reads(live);
  auto save = [&](uint64_t v, bool borrowed) -> Status {
    ShardData shard = WholeShard("w", DType::kF32, {2500}, live);
    shard.after_chunk_read = reads.Hook();
    SavePart part{v, 0, {shard}, {}};
    auto h = borrowed ? store->SaveBorrowed(part) : store->SaveAsync(part);
    if (!h.ok()) return h.status();
    HY_RETURN_IF_ERROR((*h)->Wait(nullptr));
    return store->Commit(Commit(v));
  };
  // New chunks: hashed, then encoded.
  ASSERT_TRUE(save(1, true).ok());
  EXPECT_EQ(reads.Take(), EachChunk(2));
  // Chunks the store holds already: hashed only.
  ASSERT_TRUE(save(2, true).ok());
  EXPECT_EQ(reads.Take(), EachChunk(1));
  // SaveAsync above its staging budget reads in place too.
  ASSERT_TRUE(save(3, false).ok());
  EXPECT_EQ(reads.Take(), EachChunk(1));
  // Within the budget it reads its own copy: not the caller's business.
  o.staging_bytes = 1 << 20;
  store.reset();
  store = std::move(Store::Open(dir.path(), o)).value();
  ASSERT_TRUE(save(4, false).ok());
  EXPECT_TRUE(reads.Take().empty());
  // A synchronous Save reads the caller's bytes.
  ShardData shard = WholeShard("w", DType::kF32, {2500}, live);
  shard.after_chunk_read = reads.Hook();
  ASSERT_TRUE(store->Save({5, 0, {shard}, {}}, nullptr).ok());
  EXPECT_EQ(reads.Take(), EachChunk(1));
  ASSERT_TRUE(store->Commit(Commit(5)).ok());
  EXPECT_EQ(ReadShard(store.get(), 5, "w", live.size()), live);
}

}  // namespace
}  // namespace hy::statestore
