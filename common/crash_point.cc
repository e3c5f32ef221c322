// CrashPoint (see hy/common/crash_point.h).

#include "hy/common/crash_point.h"

#ifdef HY_TEST_HOOKS

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace hy {

void CrashPoint(const char* point, int rank, int64_t step) {
  static const char* const want = std::getenv("HY_TEST_CRASH_AT");
  if (want == nullptr || *want == '\0') return;
  const char* restart = std::getenv("HY_RESTART_COUNT");
  if (restart != nullptr && std::atoi(restart) > 0) return;
  const std::string spec = want;
  const size_t c1 = spec.find(':');
  if (spec.substr(0, c1) != point) return;
  if (c1 != std::string::npos) {
    const size_t c2 = spec.find(':', c1 + 1);
    const std::string r = spec.substr(c1 + 1, c2 == std::string::npos
                                                   ? std::string::npos
                                                   : c2 - c1 - 1);
    if (!r.empty() && std::atoi(r.c_str()) != rank) return;
    if (c2 != std::string::npos &&
        std::atoll(spec.c_str() + c2 + 1) != static_cast<long long>(step)) {
      return;
    }
  }
  char line[160];
  const int n = std::snprintf(line, sizeof(line),
                              "hy: crash point %s (rank %d, step %lld): "
                              "exiting %d (HY_TEST_CRASH_AT)\n",
                              point, rank, static_cast<long long>(step),
                              kCrashPointExit);
  if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
  _exit(kCrashPointExit);
}

}  // namespace hy

#endif  // HY_TEST_HOOKS
