#include "hy/common/thread_pool.h"

#include <atomic>
#include <cassert>
#include <memory>

namespace hy {

ThreadPool::ThreadPool(size_t num_threads) {
  assert(num_threads >= 1);
  if (num_threads == 0) num_threads = 1;
  threads_.reserve(num_threads);
  for (size_t i = 0; i < num_threads; ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::Schedule(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // Stopping and drained.
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  if (n == 1) {
    fn(0);
    return;
  }
  // Indices are claimed from a shared counter by up to num_threads helpers
  // plus the caller. The caller never blocks on a helper that has not
  // started: it waits only for helpers that claimed an index, so a
  // ParallelFor issued from inside a task completes even if every worker is
  // busy.
  struct Shared {
    std::atomic<size_t> next{0};
    std::mutex mu;
    std::condition_variable done_cv;
    size_t active = 0;  // Helpers inside the loop. Guarded by mu.
  };
  auto shared = std::make_shared<Shared>();
  auto run = [shared, n, &fn](bool helper) {
    if (helper) {
      std::lock_guard<std::mutex> lock(shared->mu);
      if (shared->next.load() >= n) return;  // Nothing left; fn may be gone.
      ++shared->active;
    }
    for (size_t i; (i = shared->next.fetch_add(1)) < n;) fn(i);
    if (helper) {
      std::lock_guard<std::mutex> lock(shared->mu);
      if (--shared->active == 0) shared->done_cv.notify_all();
    }
  };
  const size_t helpers = std::min(threads_.size(), n - 1);
  for (size_t h = 0; h < helpers; ++h) {
    Schedule([run] { run(true); });
  }
  run(false);
  std::unique_lock<std::mutex> lock(shared->mu);
  shared->done_cv.wait(lock, [&] { return shared->active == 0; });
}

size_t ThreadPool::DefaultThreadCount() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

}  // namespace hy
