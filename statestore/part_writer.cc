// Store::NewPartWriter: a part written piece by piece through a bounded
// buffer (see store.h). Bytes are copied into the buffer as they come and
// cut into chunks at the same offsets Save would cut them; whenever the
// buffer is full its whole chunks go through the PartBuilder, and the
// chunk still being filled moves to the buffer's start.

#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include "part_builder.h"
#include "store_impl.h"

namespace hy::statestore {

class BufferedPartWriter : public PartWriter {
 public:
  BufferedPartWriter(RocksStore* store, uint64_t version, int rank,
                     uint64_t buffer_bytes)
      : gc_(store->gc_mu_),
        builder_(store, version, rank),
        chunk_bytes_(store->options_.chunk_bytes) {
    // Whole chunks, at least one: a chunk being filled always fits. The
    // buffer grows to it as bytes come (a small part takes little).
    const uint64_t chunks = std::max<uint64_t>(1, buffer_bytes / chunk_bytes_);
    capacity_ = chunks * chunk_bytes_;
  }

  Status Start() { return Fail(builder_.Start()); }

  Status BeginShard(const TensorMeta& meta, const ShardGeometry& geometry,
                    bool cast_to_bf16) override {
    HY_RETURN_IF_ERROR(failed_);
    if (filled_ != bytes_) return Unfinished();
    HY_RETURN_IF_ERROR(Fail(builder_.BeginShard(meta, geometry, cast_to_bf16)));
    name_ = meta.name;
    ++shard_;
    bytes_ =
        static_cast<uint64_t>(geometry.NumElements()) * DTypeSize(meta.dtype);
    filled_ = 0;
    chunk_ = 0;
    return Status::OK();
  }

  Status Append(ConstBytes bytes) override {
    HY_RETURN_IF_ERROR(failed_);
    if (shard_ == 0 || bytes.size() > bytes_ - filled_) {
      return Fail(Status::InvalidArgument(
          "part writer: " + std::to_string(bytes.size()) + " bytes past the " +
          (shard_ == 0 ? std::string("start of any shard")
                       : "end of tensor '" + name_ + "'")));
    }
    while (!bytes.empty()) {
      const uint64_t in_chunk = used_ - chunk_start_;
      const uint64_t n = std::min<uint64_t>(
          bytes.size(), std::min(chunk_bytes_ - in_chunk, bytes_ - filled_));
      if (used_ + n > capacity_) HY_RETURN_IF_ERROR(Flush());
      if (used_ + n > buffer_.size()) {
        buffer_.resize(
            std::min(capacity_, std::max(used_ + n, 2 * buffer_.size())));
      }
      std::memcpy(buffer_.data() + used_, bytes.data(), n);
      used_ += n;
      filled_ += n;
      bytes = bytes.subspan(n);
      if (used_ - chunk_start_ == chunk_bytes_ || filled_ == bytes_) {
        ready_.push_back({shard_ - 1, chunk_++, {}, {}});
        offsets_.push_back(chunk_start_);
        sizes_.push_back(used_ - chunk_start_);
        chunk_start_ = used_;
      }
    }
    return Status::OK();
  }

  Status Finish(const std::vector<BlobData>& blobs, SaveStats* stats) override {
    HY_RETURN_IF_ERROR(failed_);
    if (filled_ != bytes_) return Unfinished();
    HY_RETURN_IF_ERROR(Flush());
    HY_RETURN_IF_ERROR(Fail(builder_.Finish(blobs, stats)));
    failed_ = Status::FailedPrecondition("part writer already finished");
    return Status::OK();
  }

 private:
  Status Fail(Status s) {
    if (!s.ok() && failed_.ok()) failed_ = s;
    return s;
  }
  Status Unfinished() {
    return Fail(Status::InvalidArgument(
        "part writer: tensor '" + name_ + "' got " + std::to_string(filled_) +
        " of its " + std::to_string(bytes_) + " bytes"));
  }
  // Writes the buffer's whole chunks; the one being filled moves to the
  // start.
  Status Flush() {
    for (size_t i = 0; i < ready_.size(); ++i) {
      ready_[i].raw = ConstBytes(buffer_.data() + offsets_[i], sizes_[i]);
    }
    HY_RETURN_IF_ERROR(Fail(builder_.AddChunks(&ready_, 0, nullptr)));
    ready_.clear();
    offsets_.clear();
    sizes_.clear();
    const uint64_t partial = used_ - chunk_start_;
    std::memmove(buffer_.data(), buffer_.data() + chunk_start_, partial);
    chunk_start_ = 0;
    used_ = partial;
    return Status::OK();
  }

  std::shared_lock<std::shared_mutex> gc_;  // Gc waits for the writer.
  PartBuilder builder_;
  const uint64_t chunk_bytes_;
  Status failed_;
  uint64_t capacity_ = 0;  // The most buffer_ grows to.
  std::vector<uint8_t> buffer_;
  uint64_t used_ = 0;                // Bytes of buffer_ in use.
  uint64_t chunk_start_ = 0;         // Where the chunk being filled starts.
  std::vector<PendingChunk> ready_;  // Whole chunks in the buffer.
  std::vector<uint64_t> offsets_, sizes_;  // Theirs, in the buffer.
  size_t shard_ = 0;                       // Shards begun.
  std::string name_;                       // The current shard's tensor.
  uint64_t bytes_ = 0, filled_ = 0;        // The current shard's size, so far.
  size_t chunk_ = 0;                       // Next chunk index within the shard.
};

Result<std::unique_ptr<PartWriter>> RocksStore::NewPartWriter(
    uint64_t version, int rank, uint64_t buffer_bytes) {
  if (read_only()) return Status::FailedPrecondition("store is read-only");
  if (rank < 0) return Status::InvalidArgument("rank must be >= 0");
  if (version > kMaxVersion) {
    return Status::InvalidArgument("version number too large");
  }
  auto w =
      std::make_unique<BufferedPartWriter>(this, version, rank, buffer_bytes);
  HY_RETURN_IF_ERROR(w->Start());
  return std::unique_ptr<PartWriter>(std::move(w));
}

}  // namespace hy::statestore
