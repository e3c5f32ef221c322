#include "staging_pool.h"

#include <iterator>
#include <utility>

namespace hy::statestore {

StagingPool::Buffer StagingPool::Acquire(size_t n, Kind kind) {
  const int k = static_cast<int>(kind);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_[k].lower_bound(n);
    if (it != free_[k].end() && (it->first <= 2 * n || it->first <= 4096)) {
      Buffer b{std::move(it->second), it->first, kind};
      kept_[k] -= it->first;
      free_[k].erase(it);
      return b;
    }
  }
  const Allocator& a = allocators_[k];
  // Not zeroed: every byte is overwritten by the snapshot copy.
  uint8_t* p = a.allocate ? a.allocate(n == 0 ? 1 : n) : nullptr;
  if (p == nullptr) return Buffer{Memory(nullptr, a.free), 0, kind};
  return Buffer{Memory(p, a.free), n, kind};
}

StagingPool::Allocator StagingPool::HeapAllocator() {
  return {[](size_t n) { return new uint8_t[n]; },
          [](uint8_t* p) { delete[] p; }};
}

void StagingPool::Release(Buffer b) {
  if (b.data == nullptr) return;
  const int k = static_cast<int>(b.kind);
  std::lock_guard<std::mutex> lock(mu_);
  kept_[k] += b.capacity;
  free_[k].emplace(b.capacity, std::move(b.data));
  // The largest kept buffer of either kind goes first (pageable on a tie).
  auto largest_of = [this](int kind) -> size_t {
    return free_[kind].empty() ? 0 : std::prev(free_[kind].end())->first;
  };
  while (kept_[0] + kept_[1] > keep_bytes_) {
    const int from = largest_of(1) > largest_of(0) ? 1 : 0;
    if (free_[from].empty()) break;
    auto largest = std::prev(free_[from].end());
    kept_[from] -= largest->first;
    free_[from].erase(largest);  // Frees it.
  }
}

uint64_t StagingPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kept_[0] + kept_[1];
}

uint64_t StagingPool::kept_bytes(Kind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  return kept_[static_cast<int>(kind)];
}

}  // namespace hy::statestore
