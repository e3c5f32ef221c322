#include "hy/common/scratch_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace hy {

Result<ScratchFile> CreateScratchFile(const std::string& dir,
                                      const std::string& prefix) {
  static std::atomic<int> counter{0};
  ScratchFile f;
  f.path = dir + "/" + prefix + "-" + std::to_string(::getpid()) + "-" +
           std::to_string(counter++) + ".bin";
  f.fd = ::open(f.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (f.fd < 0) {
    return Status::IOError("cannot create " + f.path + ": " +
                           std::strerror(errno));
  }
  ::unlink(f.path.c_str());  // Lives while open or mapped.
  return f;
}

}  // namespace hy
