// Helpers shared by checkpoint.cc and checkpoint_reader.cc (internal).
#ifndef HY_CHECKPOINT_CHECKPOINT_INTERNAL_H_
#define HY_CHECKPOINT_CHECKPOINT_INTERNAL_H_

#include <memory>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/statestore/store.h"

namespace hy::checkpoint::internal {

// Threads per store: several ranks (and readers of several old stores)
// share a node's cores.
inline constexpr size_t kWriterThreads = 2;
inline constexpr size_t kReaderThreads = 4;

inline std::string StepName(uint64_t step) {
  return "step " + std::to_string(step);
}

Result<std::unique_ptr<statestore::Store>> OpenReadOnly(
    const std::string& path);

}  // namespace hy::checkpoint::internal

#endif  // HY_CHECKPOINT_CHECKPOINT_INTERNAL_H_
