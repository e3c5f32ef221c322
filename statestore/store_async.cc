// Store::SaveAsync: snapshot the caller's buffers into bounded staging
// memory, then save in the background (see store.h).

#include <condition_variable>
#include <memory>
#include <mutex>

#include "store_impl.h"

namespace hy::statestore {

struct RocksStore::Staged {
  SavePart part;                     // Views into `buffers`.
  std::vector<std::string> buffers;  // The snapshot copies.
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
  for (const ShardData& s : part.shards) staged->bytes += s.data.size();
  for (const BlobData& b : part.blobs) staged->bytes += b.data.size();
  if (staged->bytes > options_.staging_bytes) {
    // More than the whole staging budget: saved here, straight from the
    // caller's buffers, before returning. The caller waits for the save
    // (that is the values at call time, in bounded memory); the handle is
    // done on return and carries the outcome.
    auto handle = std::make_shared<AsyncHandle>();
    SaveStats stats;
    Status s = Save(part, &stats);
    handle->Finish(std::move(s), stats);
    return std::unique_ptr<SaveHandle>(new HandleRef(handle));
  }
  {
    std::unique_lock<std::mutex> lock(staging_mu_);
    staging_cv_.wait(lock, [&] {
      return staging_used_ + staged->bytes <= options_.staging_bytes;
    });
    staging_used_ += staged->bytes;
  }
  // Snapshot every buffer now; the caller may reuse its memory on return.
  staged->buffers.reserve(part.shards.size() + part.blobs.size());
  for (ShardData& s : part.shards) {
    staged->buffers.emplace_back(s.data.AsStringView());
    s.data = ConstBytes(staged->buffers.back());
  }
  for (BlobData& b : part.blobs) {
    staged->buffers.emplace_back(b.data.AsStringView());
    b.data = ConstBytes(staged->buffers.back());
  }
  staged->part = std::move(part);
  auto handle = std::make_shared<AsyncHandle>();
  async_pool_->Schedule([this, staged, handle] {
    SaveStats stats;
    Status s = Save(staged->part, &stats);
    {
      std::lock_guard<std::mutex> lock(staging_mu_);
      staging_used_ -= staged->bytes;
    }
    staging_cv_.notify_all();
    staged->buffers.clear();
    handle->Finish(std::move(s), stats);
  });
  return std::unique_ptr<SaveHandle>(new HandleRef(handle));
}

}  // namespace hy::statestore
