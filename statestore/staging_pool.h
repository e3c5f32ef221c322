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
// The memory comes from an Allocator: new[] by default; the store keeps a
// second pool of page-locked memory (GpuHostAlloc) for shards in CUDA
// memory, so that their device-to-host copies run at the link's speed.
//
// Ownership: a Buffer owns its memory until released back to the pool (or
// destroyed, which frees it through the allocator). Thread-safety: Acquire
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

  using Memory = std::unique_ptr<uint8_t[], std::function<void(uint8_t*)>>;
  struct Buffer {
    Memory data;  // Null when the allocator failed.
    size_t capacity = 0;
  };

  // Keeps at most keep_bytes of released buffers (0: keeps none).
  explicit StagingPool(uint64_t keep_bytes,
                       Allocator allocator = HeapAllocator())
      : keep_bytes_(keep_bytes), allocator_(std::move(allocator)) {}

  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A buffer of at least n bytes, contents unspecified: the smallest kept
  // one that fits and is less than twice n, else a new one from the
  // allocator (its data null when the allocator returned null).
  Buffer Acquire(size_t n);

  // Gives `b` back; the largest kept buffers are freed first while more
  // than keep_bytes are kept.
  void Release(Buffer b);

  uint64_t kept_bytes() const;

 private:
  const uint64_t keep_bytes_;
  const Allocator allocator_;
  mutable std::mutex mu_;
  std::multimap<size_t, Memory> free_;                      // By capacity.
  uint64_t kept_ = 0;                                       // Guarded by mu_.
};

}  // namespace hy::statestore

#endif  // HY_STATESTORE_STAGING_POOL_H_
