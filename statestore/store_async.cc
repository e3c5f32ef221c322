// Store::SaveAsync and Store::SaveBorrowed: snapshot what is not read in
// place into bounded staging memory, then save in the background (see
// store.h). A part larger than SaveAsync's budget is a bounded blocking
// copy: what does not fit is read in place while the call waits; a
// borrowed part is read in place after the call returns.

#include <condition_variable>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <mutex>

#include "hy/common/gpu.h"
#include "store_impl.h"

namespace hy::statestore {

struct RocksStore::Staged {
  SavePart part;                             // Views into `buffers`.
  std::vector<StagingPool::Buffer> buffers;  // The snapshot copies.
  uint64_t bytes = 0;
};

void RocksStore::ReleaseStaged(Staged* staged) {
  {
    std::lock_guard<std::mutex> lock(staging_mu_);
    staging_used_ -= staged->bytes;
  }
  staging_cv_.notify_all();
  for (StagingPool::Buffer& b : staged->buffers) {
    staging_pool_->Release(std::move(b));
  }
  staged->buffers.clear();
}

namespace {

class AsyncHandle : public SaveHandle {
 public:
  explicit AsyncHandle(std::shared_future<void> read)
      : read_(std::move(read)) {}

  Status Wait(SaveStats* stats) override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
    if (stats) *stats = stats_;
    return status_;
  }
  bool Done() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  void WaitRead() override { read_.wait(); }
  void Finish(Status s, const SaveStats& stats) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = std::move(s);
      stats_ = stats;
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  const std::shared_future<void> read_;  // Ready once the buffers are free.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
  SaveStats stats_;
};

// Shared ownership between the caller's handle and the background task.
class HandleRef : public SaveHandle {
 public:
  explicit HandleRef(std::shared_ptr<AsyncHandle> h) : h_(std::move(h)) {}
  Status Wait(SaveStats* stats) override { return h_->Wait(stats); }
  bool Done() const override { return h_->Done(); }
  void WaitRead() override { h_->WaitRead(); }

 private:
  std::shared_ptr<AsyncHandle> h_;
};

}  // namespace

Result<std::unique_ptr<SaveHandle>> RocksStore::SaveAsync(SavePart part) {
  // A part larger than the whole budget: its first shards stay borrowed
  // from the caller (read in place while this call waits), the rest is
  // copied into staging as usual. The split keeps the copy within budget.
  uint64_t total = 0;
  for (const ShardData& s : part.shards) total += s.data.size();
  for (const BlobData& b : part.blobs) total += b.data.size();
  // GPU shards are never read in place: the borrowed prefix stops at one.
  size_t borrowed = 0;
  while (total > options_.staging_bytes && borrowed < part.shards.size() &&
         !part.shards[borrowed].on_gpu) {
    total -= part.shards[borrowed++].data.size();
  }
  return StartSave(std::move(part), borrowed, /*wait_read=*/true);
}

Result<std::unique_ptr<SaveHandle>> RocksStore::SaveBorrowed(SavePart part) {
  const size_t borrowed = part.shards.size();
  return StartSave(std::move(part), borrowed, /*wait_read=*/false);
}

Result<std::unique_ptr<SaveHandle>> RocksStore::StartSave(SavePart part,
                                                          size_t borrowed,
                                                          bool wait_read) {
  if (read_only()) return Status::FailedPrecondition("store is read-only");
  HY_RETURN_IF_ERROR(CheckSavePart(part));
  HY_RETURN_IF_ERROR(CheckHostShards(part, borrowed));
  for (size_t i = borrowed; i < part.shards.size(); ++i) {
    if (!part.shards[i].on_gpu) continue;
    if (GpuDeviceCount() == 0) {
      return Status::Unavailable("tensor '" + part.shards[i].meta.name +
                                 "' is in CUDA memory and no CUDA device is "
                                 "usable here");
    }
  }
  auto staged = std::make_shared<Staged>();
  for (size_t i = borrowed; i < part.shards.size(); ++i) {
    staged->bytes += part.shards[i].data.size();
  }
  for (const BlobData& b : part.blobs) staged->bytes += b.data.size();
  {
    std::unique_lock<std::mutex> lock(staging_mu_);
    staging_cv_.wait(lock, [&] {
      return staging_used_ + staged->bytes <= options_.staging_bytes ||
             staging_used_ == 0;  // Blobs alone above budget: one at a time.
    });
    staging_used_ += staged->bytes;
  }
  // Snapshot every buffer not borrowed now; the caller may reuse its memory
  // on return. GPU shards go to page-locked memory (pageable if the driver
  // cannot lock more), copied on this thread's own stream.
  staged->buffers.reserve(part.shards.size() - borrowed + part.blobs.size());
  auto snapshot = [&](ConstBytes* data, bool on_gpu) -> Status {
    StagingPool::Buffer b;
    if (on_gpu) {
      b = staging_pool_->Acquire(data->size(), StagingPool::Kind::kPageLocked);
    }
    if (b.data == nullptr) b = staging_pool_->Acquire(data->size());
    if (on_gpu) {
      HY_RETURN_IF_ERROR(GpuCopy(b.data.get(), data->data(), data->size()));
    } else if (!data->empty()) {
      std::memcpy(b.data.get(), data->data(), data->size());
    }
    *data = ConstBytes(b.data.get(), data->size());
    staged->buffers.push_back(std::move(b));
    return Status::OK();
  };
  Status copied;
  for (size_t i = borrowed; i < part.shards.size() && copied.ok(); ++i) {
    ShardData& shard = part.shards[i];
    copied = snapshot(&shard.data, shard.on_gpu);
    if (!copied.ok()) {
      copied = copied.WithContext("copying tensor '" + shard.meta.name +
                                  "' from the GPU");
    }
    shard.on_gpu = false;              // The copy is host memory.
    shard.after_chunk_read = nullptr;  // Reads the copy, not theirs.
  }
  for (size_t i = 0; i < part.blobs.size() && copied.ok(); ++i) {
    copied = snapshot(&part.blobs[i].data, false);
  }
  if (!copied.ok()) {  // Nothing is saved; the staging goes back.
    ReleaseStaged(staged.get());
    return copied;
  }
  staged->part = std::move(part);
  // Ready once nothing reads the caller's buffers: at once when every one
  // was copied, else when the save lets the borrowed ones go (exactly
  // once, whatever its outcome).
  auto released = std::make_shared<std::promise<void>>();
  std::shared_future<void> read = released->get_future().share();
  std::function<void()> release;
  if (borrowed == 0) {
    released->set_value();
  } else {
    release = [released] { released->set_value(); };
  }
  auto handle = std::make_shared<AsyncHandle>(read);
  async_pool_->Schedule([this, staged, handle, borrowed, release] {
    SaveStats stats;
    Status s = SaveBorrowing(staged->part, &stats, borrowed, release);
    ReleaseStaged(staged.get());
    handle->Finish(std::move(s), stats);
  });
  // SaveAsync: the borrowed shards are the caller's memory; wait until
  // they are read.
  if (wait_read) read.wait();
  return std::unique_ptr<SaveHandle>(new HandleRef(handle));
}

}  // namespace hy::statestore
