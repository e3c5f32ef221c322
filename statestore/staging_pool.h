// StagingPool: the memory SaveAsync copies snapshots into, kept across
// saves (internal to the store).
//
// A fresh allocation of hundreds of MiB costs a page fault per 4 KiB page
// the first time it is written: measured here, that made a snapshot copy
// 9-13x slower than a memcpy into memory already in use. The pool keeps
// released buffers (up to `keep_bytes` in all) and hands them out again,
// so from the second save of the same shapes on, a snapshot is a plain
// memcpy.
//
// The memory comes from two Allocators: pageable (new[] by default) for
// shards in host memory, and page-locked (GpuHostAlloc, given by the store)
// for shards in CUDA memory, so that their device-to-host copies run at
// the link's speed. Both kinds count against one budget: a store that
// snapshots host and GPU shards keeps no more than keep_bytes in all.
//
// Ownership: a Buffer owns its memory until released back to the pool (or
// destroyed, which frees it through its allocator). Thread-safety: Acquire
// and Release may be called from any thread.

#ifndef HY_STATESTORE_STAGING_POOL_H_
#define HY_STATESTORE_STAGING_POOL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace hy::statestore {

class StagingPool {
 public:
  // Makes and frees buffers. allocate returns null when it cannot.
  struct Allocator {
    std::function<uint8_t*(size_t)> allocate;
    std::function<void(uint8_t*)> free;
  };
  // new[] / delete[] (allocate throws std::bad_alloc, as any allocation).
  static Allocator HeapAllocator();

  enum class Kind { kPageable = 0, kPageLocked = 1 };

  using Memory = std::unique_ptr<uint8_t[], std::function<void(uint8_t*)>>;
  struct Buffer {
    Memory data;  // Null when the allocator failed.
    size_t capacity = 0;
    Kind kind = Kind::kPageable;
  };

  // Keeps at most keep_bytes of released buffers of both kinds together
  // (0: keeps none). Without a page_locked allocator, Acquire of that kind
  // returns a null buffer.
  explicit StagingPool(uint64_t keep_bytes,
                       Allocator pageable = HeapAllocator(),
                       Allocator page_locked = {})
      : keep_bytes_(keep_bytes),
        allocators_{std::move(pageable), std::move(page_locked)} {}

  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A buffer of `kind` of at least n bytes, contents unspecified: the
  // smallest kept one of that kind that fits and is less than twice n, else
  // a new one from the kind's allocator (its data null when the allocator
  // returned null or there is none).
  Buffer Acquire(size_t n, Kind kind = Kind::kPageable);

  // Gives `b` back; while more than keep_bytes are kept, the largest kept
  // buffer of either kind is freed first.
  void Release(Buffer b);

  // What is kept: of both kinds, or of one.
  uint64_t kept_bytes() const;
  uint64_t kept_bytes(Kind kind) const;

 private:
  const uint64_t keep_bytes_;
  const Allocator allocators_[2];  // By Kind.
  mutable std::mutex mu_;
  std::multimap<size_t, Memory> free_[2];  // By Kind, then capacity.
  uint64_t kept_[2] = {0, 0};              // Guarded by mu_.
};

}  // namespace hy::statestore

#endif  // HY_STATESTORE_STAGING_POOL_H_
