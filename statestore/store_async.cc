// Store::SaveAsync: snapshot the caller's buffers into bounded staging
// memory, then save in the background (see store.h). A part larger than
// the budget is a bounded blocking copy: what does not fit is read in place
// while the call waits.

#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>

#include "store_impl.h"

namespace hy::statestore {

struct RocksStore::Staged {
  SavePart part;                             // Views into `buffers`.
  std::vector<StagingPool::Buffer> buffers;  // The snapshot copies.
  uint64_t bytes = 0;
};

namespace {

class AsyncHandle : public SaveHandle {
 public:
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

 private:
  std::shared_ptr<AsyncHandle> h_;
};

}  // namespace

Result<std::unique_ptr<SaveHandle>> RocksStore::SaveAsync(SavePart part) {
  if (read_only()) return Status::FailedPrecondition("store is read-only");
  HY_RETURN_IF_ERROR(CheckSavePart(part));
  auto staged = std::make_shared<Staged>();
  uint64_t total = 0;
  for (const ShardData& s : part.shards) total += s.data.size();
  for (const BlobData& b : part.blobs) total += b.data.size();
  // A part larger than the whole budget: its first shards stay borrowed
  // from the caller (read in place while this call waits), the rest is
  // copied into staging as usual. The split keeps the copy within budget.
  size_t borrowed = 0;
  staged->bytes = total;
  while (staged->bytes > options_.staging_bytes &&
         borrowed < part.shards.size()) {
    staged->bytes -= part.shards[borrowed++].data.size();
  }
  {
    std::unique_lock<std::mutex> lock(staging_mu_);
    staging_cv_.wait(lock, [&] {
      return staging_used_ + staged->bytes <= options_.staging_bytes ||
             staging_used_ == 0;  // Blobs alone above budget: one at a time.
    });
    staging_used_ += staged->bytes;
  }
  // Snapshot every buffer not borrowed now; the caller may reuse its memory
  // on return.
  staged->buffers.reserve(part.shards.size() + part.blobs.size());
  auto snapshot = [&](ConstBytes* data) {
    StagingPool::Buffer b = staging_pool_->Acquire(data->size());
    if (!data->empty()) std::memcpy(b.data.get(), data->data(), data->size());
    *data = ConstBytes(b.data.get(), data->size());
    staged->buffers.push_back(std::move(b));
  };
  for (size_t i = borrowed; i < part.shards.size(); ++i) {
    snapshot(&part.shards[i].data);
  }

  for (BlobData& b : part.blobs) snapshot(&b.data);
  staged->part = std::move(part);
  auto handle = std::make_shared<AsyncHandle>();
  auto released = std::make_shared<std::promise<void>>();
  std::future<void> borrowed_free = released->get_future();
  async_pool_->Schedule([this, staged, handle, borrowed, released] {
    SaveStats stats;
    Status s = SaveBorrowing(staged->part, &stats, borrowed,
                             [released] { released->set_value(); });
    {
      std::lock_guard<std::mutex> lock(staging_mu_);
      staging_used_ -= staged->bytes;
    }
    staging_cv_.notify_all();
    for (StagingPool::Buffer& b : staged->buffers) {
      staging_pool_->Release(std::move(b));
    }
    staged->buffers.clear();
    handle->Finish(std::move(s), stats);
  });
  // The borrowed shards are the caller's memory: wait until they are read.
  if (borrowed > 0) borrowed_free.wait();
  return std::unique_ptr<SaveHandle>(new HandleRef(handle));
}

}  // namespace hy::statestore
