// Small helpers the benchmarks share: timing and page-cache eviction.

#ifndef HY_BENCH_BENCH_UTIL_H_
#define HY_BENCH_BENCH_UTIL_H_

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

namespace hy::bench {

// Wall-clock seconds that fn() takes.
inline double Seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

// Evicts every file under `dir` from the page cache (after writing back any
// dirty pages), so the next read of them is cold.
inline void DropPageCache(const std::string& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const int fd = open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

}  // namespace hy::bench

#endif  // HY_BENCH_BENCH_UTIL_H_
