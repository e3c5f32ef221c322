// A committed part streamed in bounded messages (internal to the
// Replicator): every message but a single oversized record stays within
// the piece size, the part written piece by piece into another store is bit
// for bit the stored one, and a garbled or cut-short stream is DataLoss and
// prepares nothing, never a wrong part.

#include "replica_stream.h"

#include <gtest/gtest.h>

#include <random>

#include "statestore/store_test_util.h"

namespace hy::recovery::internal {
namespace {

using statestore::testing::TempDir;

struct Saved {
  std::unique_ptr<statestore::Store> store;
  std::vector<std::vector<float>> tensors;
  std::string blob;
};

// Version 3, rank 1 of 2: three shards (one of one element), two blobs.
Saved SavePart(const std::string& path) {
  Saved s;
  s.store = std::move(statestore::Store::Open(path, {})).value();
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  for (int64_t n : {int64_t{1000}, int64_t{1}, int64_t{333}}) {
    s.tensors.emplace_back(n);
    for (float& x : s.tensors.back()) x = nd(rng);
  }
  s.blob = std::string(700, 'b');
  statestore::SavePart part;
  part.version = 3;
  part.rank = 1;
  for (size_t t = 0; t < s.tensors.size(); ++t) {
    statestore::ShardData d;
    const int64_t n = static_cast<int64_t>(s.tensors[t].size());
    d.meta = TensorMeta{"t" + std::to_string(t), DType::kF32, {2 * n}};
    d.geometry = ShardGeometry::FromRuns({FlatRun{n, n}});
    d.data = ConstBytes(s.tensors[t].data(), n * 4);
    part.shards.push_back(d);
  }
  part.blobs.push_back({"rng", 1, ConstBytes(s.blob)});
  part.blobs.push_back({"config", statestore::kReplicatedBlob,
                        ConstBytes(std::string_view("{}"))});
  Status saved = s.store->Save(part, nullptr);
  EXPECT_TRUE(saved.ok()) << saved;
  statestore::CommitRecord c;
  c.version = 3;
  c.step = 3;
  c.world_size = 2;
  c.ranks = {1};
  EXPECT_TRUE(s.store->Commit(c).ok());
  return s;
}

// `copy` holds version 3 of `saved` bit for bit (tensors and the rng
// blob), and verifies.
void ExpectCopyOf(const Saved& saved, statestore::Store* copy) {
  for (size_t t = 0; t < saved.tensors.size(); ++t) {
    std::vector<float> back(saved.tensors[t].size());
    ASSERT_TRUE(copy->ReadShard(3, "t" + std::to_string(t), 1,
                                MutableBytes(back.data(), back.size() * 4))
                    .ok());
    EXPECT_EQ(back, saved.tensors[t]) << t;
  }
  EXPECT_EQ(*copy->ReadBlob(3, "rng", 1), saved.blob);
  EXPECT_TRUE(copy->Verify(3)->ok());
}

TEST(ReplicaStreamTest, BoundedMessagesReassembleTheSamePart) {
  TempDir dir;
  Saved saved = SavePart(dir.Sub("own"));
  Result<PartSender> sender = PartSender::Open(saved.store.get(), 3, 1024);
  ASSERT_TRUE(sender.ok()) << sender.status();
  EXPECT_EQ(sender->raw_bytes(), 1334u * 4);
  // Pieces of at most 1 KiB, whole records per message: [1024] [1024]
  // [1024] [928 + 4] [1024] [308 + 700 + 2].
  EXPECT_EQ(sender->messages(), 6u);
  std::unique_ptr<statestore::Store> copy =
      std::move(statestore::Store::Open(dir.Sub("copy"), {})).value();
  // A writer buffer smaller than a piece.
  PartReceiver receiver(copy.get(), 512);
  std::vector<uint8_t> message;
  size_t largest = 0;
  for (uint64_t m = 0; m < sender->messages(); ++m) {
    ASSERT_TRUE(sender->Next(&message).ok());
    ASSERT_FALSE(message.empty());
    if (m > 0) largest = std::max(largest, message.size());
    EXPECT_FALSE(receiver.complete());
    ASSERT_TRUE(receiver.Add(message, 3).ok());
  }
  ASSERT_TRUE(sender->Next(&message).ok());
  EXPECT_TRUE(message.empty());
  // A piece plus the codec's header and the record lengths.
  EXPECT_LE(largest, 1024u + 256u);
  ASSERT_TRUE(receiver.complete());
  EXPECT_TRUE(receiver.status().ok());

  // Nothing is prepared until Finish; then the copy reads back exactly.
  EXPECT_TRUE(copy->ListVersions()->empty());
  ASSERT_TRUE(receiver.Finish().ok());
  ASSERT_TRUE(copy->Commit(receiver.commit()).ok());
  ExpectCopyOf(saved, copy.get());

  // The same stream again (a repeated replication) is checked, not written.
  PartSender again =
      std::move(PartSender::Open(saved.store.get(), 3, 1024)).value();
  PartReceiver repeat(copy.get(), 512);
  for (uint64_t m = 0; m < again.messages(); ++m) {
    ASSERT_TRUE(again.Next(&message).ok());
    ASSERT_TRUE(repeat.Add(message, 3).ok());
  }
  ASSERT_TRUE(repeat.complete());
  EXPECT_TRUE(repeat.Finish().ok());
}

// Pieces smaller than messages (the 4 MiB record cap, scaled down): many
// records per message, still within the message bound, and the same part.
TEST(ReplicaStreamTest, RecordsSmallerThanMessagesReassembleTheSamePart) {
  TempDir dir;
  Saved saved = SavePart(dir.Sub("own"));
  // Without a cap below the message size: one record per piece of 1 KiB.
  EXPECT_EQ(PartSender::Open(saved.store.get(), 3, 1024)->records(), 9u);
  Result<PartSender> sender = PartSender::Open(saved.store.get(), 3, 1024, 100);
  ASSERT_TRUE(sender.ok()) << sender.status();
  // 4000 bytes in 40 pieces, 4 in one, 1332 in 14, and the two blobs.
  EXPECT_EQ(sender->records(), 40u + 1 + 14 + 2);
  EXPECT_LE(sender->messages(), 8u);
  auto copy = std::move(statestore::Store::Open(dir.Sub("copy"), {})).value();
  PartReceiver receiver(copy.get(), 512);
  std::vector<uint8_t> message;
  for (uint64_t m = 0; m < sender->messages(); ++m) {
    ASSERT_TRUE(sender->Next(&message).ok());
    // Whole records within 1 KiB raw (at most 11 of them), each with its
    // codec header and length; the first message also has the header.
    if (m > 0) {
      EXPECT_LE(message.size(), 1024u + 11 * 128) << m;
    }
    ASSERT_TRUE(receiver.Add(message, 3).ok());
  }
  ASSERT_TRUE(receiver.complete());
  ASSERT_TRUE(receiver.Finish().ok());
  ASSERT_TRUE(copy->Commit(receiver.commit()).ok());
  ExpectCopyOf(saved, copy.get());
}

TEST(ReplicaStreamTest, PiecesOfABoxShardAreReadAsRegionsInItsOrder) {
  // Rank 0 holds columns [30, 80) of an [8, 100] tensor: 8 flat runs of 50
  // elements. Pieces of 30 elements start and end inside rows, and the
  // sender reads only each piece's regions back.
  TempDir dir;
  auto own = std::move(statestore::Store::Open(dir.Sub("own"), {})).value();
  std::vector<float> cols(8 * 50);
  for (size_t i = 0; i < cols.size(); ++i) cols[i] = 0.5f * i - 7;
  statestore::SavePart part;
  part.version = 1;
  statestore::ShardData d;
  d.meta = TensorMeta{"w", DType::kF32, {8, 100}};
  d.geometry = ShardGeometry::FromBox({{0, 30}, {8, 50}});
  d.data = ConstBytes(cols.data(), cols.size() * 4);
  part.shards.push_back(d);
  ASSERT_TRUE(own->Save(part, nullptr).ok());
  statestore::CommitRecord c;
  c.version = 1;
  c.world_size = 2;
  c.ranks = {0};
  ASSERT_TRUE(own->Commit(c).ok());
  // 121 bytes: pieces are cut to 120, whole elements.
  PartSender sender = std::move(PartSender::Open(own.get(), 1, 121)).value();
  EXPECT_EQ(sender.messages(), (400u + 29) / 30);
  auto copy = std::move(statestore::Store::Open(dir.Sub("copy"), {})).value();
  PartReceiver receiver(copy.get(), 4096);
  std::vector<uint8_t> message;
  for (uint64_t m = 0; m < sender.messages(); ++m) {
    ASSERT_TRUE(sender.Next(&message).ok());
    ASSERT_TRUE(receiver.Add(message, 1).ok());
  }
  ASSERT_TRUE(receiver.complete());
  ASSERT_TRUE(receiver.Finish().ok());
  ASSERT_TRUE(copy->Commit(receiver.commit()).ok());
  std::vector<float> back(cols.size());
  ASSERT_TRUE(
      copy->ReadShard(1, "w", 0, MutableBytes(back.data(), back.size() * 4))
          .ok());
  EXPECT_EQ(back, cols);
}

TEST(ReplicaStreamTest, GarbledOrShortStreamsAreDataLoss) {
  TempDir dir;
  Saved saved = SavePart(dir.Sub("own"));
  auto messages = [&] {
    PartSender sender =
        std::move(PartSender::Open(saved.store.get(), 3, 512)).value();
    std::vector<std::vector<uint8_t>> all(sender.messages());
    for (auto& m : all) EXPECT_TRUE(sender.Next(&m).ok());
    return all;
  };
  std::vector<std::vector<uint8_t>> all = messages();
  ASSERT_GE(all.size(), 3u);

  std::unique_ptr<statestore::Store> copy =
      std::move(statestore::Store::Open(dir.Sub("copy"), {})).value();
  PartReceiver cut(copy.get(), 512);  // The sender stopped after two.
  ASSERT_TRUE(cut.Add(all[0], 3).ok());
  ASSERT_TRUE(cut.Add(all[1], 3).ok());
  EXPECT_FALSE(cut.complete());
  EXPECT_TRUE(cut.status().IsDataLoss()) << cut.status();

  PartReceiver flipped(copy.get(), 512);  // A byte flipped in a piece.
  all[1][all[1].size() / 2] ^= 0x40;
  Status s = Status::OK();
  for (const auto& m : all) {
    if (s.ok()) s = flipped.Add(m, 3);
  }
  EXPECT_TRUE(s.IsDataLoss()) << s;
  EXPECT_FALSE(flipped.complete());

  PartReceiver wrong_version(copy.get(), 512);
  EXPECT_TRUE(wrong_version.Add(messages()[0], 4).IsDataLoss());
  PartReceiver truncated(copy.get(), 512);
  std::vector<uint8_t> head = messages()[0];
  head.resize(head.size() - 3);
  EXPECT_TRUE(truncated.Add(head, 3).IsDataLoss());
  // None of them prepared anything in the copy's store.
  EXPECT_TRUE(copy->ListVersions()->empty());
}

}  // namespace
}  // namespace hy::recovery::internal
