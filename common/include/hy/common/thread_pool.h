// ThreadPool: a fixed set of worker threads for CPU-bound parallel work such
// as encoding and decoding chunks.
//
// The pool owns its threads; they start in the constructor and are joined in
// the destructor after the queue drains. Tasks must not throw (hy code
// reports errors as Status); a task that throws terminates the process.
//
// Thread-safety: Schedule and ParallelFor may be called from any thread,
// including from inside a task (ParallelFor from a worker runs inline parts of
// the work on the calling thread, so it cannot deadlock waiting on itself).

#ifndef HY_COMMON_THREAD_POOL_H_
#define HY_COMMON_THREAD_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hy {

class ThreadPool {
 public:
  // REQUIRES: num_threads >= 1.
  explicit ThreadPool(size_t num_threads);
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t num_threads() const { return threads_.size(); }

  // Queues `task` to run on some worker.
  void Schedule(std::function<void()> task);

  // Runs fn(i) for every i in [0, n), spreading indices over the workers and
  // the calling thread, and returns when all have finished.
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn);

  // The number of hardware threads, at least 1.
  static size_t DefaultThreadCount();

 private:
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // Guarded by mu_.
  bool stopping_ = false;                    // Guarded by mu_.
  std::vector<std::thread> threads_;
};

}  // namespace hy

#endif  // HY_COMMON_THREAD_POOL_H_
