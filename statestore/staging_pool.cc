#include "staging_pool.h"

#include <iterator>
#include <utility>

namespace hy::statestore {

StagingPool::Buffer StagingPool::Acquire(size_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(n);
    if (it != free_.end() && (it->first <= 2 * n || it->first <= 4096)) {
      Buffer b{std::move(it->second), it->first};
      kept_ -= it->first;
      free_.erase(it);
      return b;
    }
  }
  // Not zeroed: every byte is overwritten by the snapshot copy.
  uint8_t* p = allocator_.allocate(n == 0 ? 1 : n);
  if (p == nullptr) return Buffer{Memory(nullptr, allocator_.free), 0};
  return Buffer{Memory(p, allocator_.free), n};
}

StagingPool::Allocator StagingPool::HeapAllocator() {
  return {[](size_t n) { return new uint8_t[n]; },
          [](uint8_t* p) { delete[] p; }};
}

void StagingPool::Release(Buffer b) {
  if (b.data == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  kept_ += b.capacity;
  free_.emplace(b.capacity, std::move(b.data));
  while (kept_ > keep_bytes_ && !free_.empty()) {
    auto largest = std::prev(free_.end());
    kept_ -= largest->first;
    free_.erase(largest);  // Frees it.
  }
}

uint64_t StagingPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kept_;
}

}  // namespace hy::statestore
