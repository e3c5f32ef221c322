// Internal to the Replicator: a rank's committed part as a stream of
// bounded messages, and its reassembly on a holder.
//
// The stream is a sequence of records, in this order:
//   header   commit record, rank manifest
//   pieces   per shard (manifest order), its raw bytes in pieces of at most
//            record_bytes (4 MiB, the store's chunk, unless piece_bytes
//            is smaller): raw length, then the piece encoded as a codec
//            chunk (a shard of no bytes is one empty piece)
//   blobs    per blob, its bytes
// A message carries whole records, at least one, adding records while
// their raw bytes stay within piece_bytes. So the sender holds one piece
// read back (a region read of just its elements) and one message at a
// time; the receiver writes each piece into its store as it arrives
// (Store::NewPartWriter) and holds one message, one decoded piece and the
// writer's buffer, never the whole part. Pieces smaller than messages keep
// those two piece buffers small (pieces of a whole message cost 2 x
// piece_bytes more memory per rank, at the same compression: the codec
// works chunk by chunk either way).
//
// Thread-safety: one thread per object.

#ifndef HY_RECOVERY_REPLICA_STREAM_H_
#define HY_RECOVERY_REPLICA_STREAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/statestore/manifest.h"
#include "hy/statestore/store.h"
#include "wire_util.h"

namespace hy::recovery::internal {

// Reads this rank's committed part back piece by piece.
class PartSender {
 public:
  static constexpr uint64_t kRecordBytes = uint64_t{4} << 20;

  // Reads the manifest of `version` from `own`. Returns its errors.
  // REQUIRES: piece_bytes >= 1, record_bytes >= 1; `own` outlives the
  // sender.
  static Result<PartSender> Open(statestore::Store* own, uint64_t version,
                                 uint64_t piece_bytes,
                                 uint64_t record_bytes = kRecordBytes);

  // How many messages the stream takes (known before any data is read).
  uint64_t messages() const { return messages_; }
  // How many shard pieces and blobs it carries.
  size_t records() const { return records_.size(); }
  uint64_t raw_bytes() const { return raw_bytes_; }

  // The next message into *out (cleared first); empty once all are sent.
  // Returns the store's and the codec's errors.
  Status Next(std::vector<uint8_t>* out);

 private:
  PartSender() = default;
  // One record: a piece of a shard (shard >= 0) or a blob.
  struct Record {
    int shard = -1;                   // Index into shards_, or -1.
    int blob = -1;                    // Index into part_.blobs, or -1.
    uint64_t offset = 0, length = 0;  // Of the piece within the shard.
  };
  struct Shard {
    std::string tensor;
    DType dtype = DType::kU8;
    uint64_t bytes = 0;
    std::vector<FlatRun> runs;  // In the shard's local order.
  };

  statestore::Store* own_ = nullptr;
  uint64_t version_ = 0;
  std::string header_;  // Sent first, in the first message.
  statestore::RankManifest part_;
  std::vector<Shard> shards_;
  std::vector<Record> records_;
  std::vector<size_t> message_starts_;  // First record of each message.
  uint64_t messages_ = 0, raw_bytes_ = 0;
  uint64_t sent_ = 0;         // Messages sent.
  std::vector<uint8_t> raw_;  // One piece read back.
};

// Writes a part into a store from its messages, in order, as they arrive.
class PartReceiver {
 public:
  // REQUIRES: `store` outlives the receiver; buffer_bytes >= 1.
  PartReceiver(statestore::Store* store, uint64_t buffer_bytes)
      : store_(store), buffer_bytes_(buffer_bytes) {}

  // Takes the next message. Returns DataLoss for a garbled one and the
  // store's errors (the part is then unusable: nothing of it is prepared,
  // and later messages are ignored).
  Status Add(const std::vector<uint8_t>& message, uint64_t version);

  // Whether every record has arrived.
  bool complete() const;
  // Why the part is unusable: the error Add returned, or DataLoss that the
  // stream ended early; OK when complete().
  Status status() const;

  // Writes the blobs, manifest and prepared record, and lets go of the
  // store (its Gc may run). OK as well when the store held the part
  // prepared already (a repeated replication). Returns the store's errors.
  // REQUIRES: complete().
  Status Finish();
  // The part's commit record. REQUIRES: complete().
  const statestore::CommitRecord& commit() const { return commit_; }

 private:
  Status Fail(Status s);
  Status Header(Reader* in, uint64_t version);

  statestore::Store* const store_;
  const uint64_t buffer_bytes_;
  std::unique_ptr<statestore::PartWriter> writer_;  // Null: prepared already.
  bool have_header_ = false;
  Status broken_;
  statestore::CommitRecord commit_;
  statestore::RankManifest manifest_;
  struct Shard {
    TensorMeta meta;
    ShardGeometry geometry;
    uint64_t bytes = 0;
  };
  std::vector<Shard> shards_;  // In stream order.
  std::vector<std::string> blobs_;
  size_t shard_ = 0;            // The shard being filled.
  uint64_t filled_ = 0;         // Its bytes filled.
  std::vector<uint8_t> piece_;  // One decoded piece.
};

}  // namespace hy::recovery::internal

#endif  // HY_RECOVERY_REPLICA_STREAM_H_
