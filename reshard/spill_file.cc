#include "spill_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace hy::reshard::internal {
namespace {

Status SystemError(const std::string& what) {
  return Status::IOError(what + ": " + std::strerror(errno));
}

}  // namespace

Result<std::unique_ptr<SpillFile>> SpillFile::Create(const std::string& dir) {
  static std::atomic<int> counter{0};
  const std::string path = dir + "/reshard-spill-" +
                           std::to_string(::getpid()) + "-" +
                           std::to_string(counter++) + ".bin";
  const int fd =
      ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return SystemError("reshard spill: cannot create " + path);
  ::unlink(path.c_str());  // Lives while open.
  return std::unique_ptr<SpillFile>(new SpillFile(fd, path));
}

SpillFile::~SpillFile() { ::close(fd_); }

Status SpillFile::Append(ConstBytes data, int64_t* offset) {
  *offset = size_;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done,
                               static_cast<off_t>(size_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return SystemError("reshard spill: cannot write " + path_);
    done += static_cast<size_t>(n);
  }
  size_ += static_cast<int64_t>(done);
  return Status::OK();
}

Status SpillFile::Read(int64_t offset, MutableBytes out) const {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done,
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SystemError("reshard spill: cannot read " + path_);
    if (n == 0) {
      return Status::DataLoss("reshard spill: " + path_ + " ends at " +
                              std::to_string(offset + done) + ", expected " +
                              std::to_string(offset + out.size()) + " bytes");
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

}  // namespace hy::reshard::internal
