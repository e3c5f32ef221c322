// CreateScratchFile: a new file on local disk for memory spilled out of a
// process (the trainer's offloaded tensors, the reshard executor's parked
// buckets). It is created in a given directory and unlinked at once, so it
// lives only while its descriptor (or a mapping of it) does, and a crash
// leaves nothing behind.
//
// Thread-safety: may be called from many threads (names never collide).

#ifndef HY_COMMON_SCRATCH_FILE_H_
#define HY_COMMON_SCRATCH_FILE_H_

#include <string>

#include "hy/common/result.h"

namespace hy {

struct ScratchFile {
  int fd = -1;       // Open read-write; the caller closes it.
  std::string path;  // Where it was created, for messages; already unlinked.
};

// Creates `dir`/`prefix`-<pid>-<n>.bin and unlinks it. Returns IOError
// naming the path and the system's error if it cannot be created.
Result<ScratchFile> CreateScratchFile(const std::string& dir,
                                      const std::string& prefix);

}  // namespace hy

#endif  // HY_COMMON_SCRATCH_FILE_H_
