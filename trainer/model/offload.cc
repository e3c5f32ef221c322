#include "hy/trainer/model/offload.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "hy/common/scratch_file.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21  // Linux 5.4; older headers lack the name.
#endif

namespace hy::trainer {
namespace {

Status SystemError(const std::string& what) {
  return Status::IOError(what + ": " + std::strerror(errno));
}

// Reclaims (writing dirty pages back first) where the kernel can; pages it
// leaves mapped (dirty ones under writeback) are then unmapped from this
// process, their data kept in the file's page cache. REQUIRES: [addr,
// addr + bytes) is page-aligned and inside a shared file mapping.
Status ReleasePages(uint8_t* addr, size_t bytes) {
  ::madvise(addr, bytes, MADV_PAGEOUT);  // Linux >= 5.4; advice only.
  if (::madvise(addr, bytes, MADV_DONTNEED) != 0) {
    return SystemError("offload: madvise");
  }
  return Status::OK();
}

}  // namespace

Result<OffloadedTensor> OffloadedTensor::Create(const std::string& dir,
                                                int64_t numel,
                                                at::ScalarType dtype) {
  OffloadedTensor t;
  if (numel == 0) {  // Nothing to map.
    t.tensor_ = at::zeros({0}, dtype);
    return t;
  }
  Result<ScratchFile> file = CreateScratchFile(dir, "offload");
  if (!file.ok()) return file.status().WithContext("offload");
  const int fd = file->fd;
  const std::string& path = file->path;
  const size_t bytes = static_cast<size_t>(numel) * at::elementSize(dtype);
  // Blocks on disk now, so a full disk is an error here, not a SIGBUS on
  // first write through the mapping.
  const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    ::close(fd);
    errno = err;
    return SystemError("offload: cannot allocate " + std::to_string(bytes) +
                       " bytes for " + path);
  }
  void* addr =
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);  // The mapping keeps the file.
  if (addr == MAP_FAILED) return SystemError("offload: cannot map " + path);
  t.tensor_ = at::from_blob(
      addr, {numel}, [bytes](void* p) { ::munmap(p, bytes); },
      at::TensorOptions().dtype(dtype));
  return t;
}

Status OffloadedTensor::Release() const {
  const size_t bytes = tensor_.nbytes();
  if (bytes == 0) return Status::OK();
  return ReleasePages(static_cast<uint8_t*>(tensor_.data_ptr()), bytes);
}

Status OffloadedTensor::ReleaseRange(ConstBytes range) const {
  const auto* base = static_cast<const uint8_t*>(tensor_.data_ptr());
  const uintptr_t begin = reinterpret_cast<uintptr_t>(range.data());
  const uintptr_t lo = reinterpret_cast<uintptr_t>(base);
  if (range.empty()) return Status::OK();
  if (base == nullptr || begin < lo ||
      begin + range.size() > lo + tensor_.nbytes()) {
    return Status::InvalidArgument(
        "offload: the range to release is not within the offloaded tensor");
  }
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + range.size()) / page * page;
  if (first >= last) return Status::OK();  // No whole page inside.
  return ReleasePages(reinterpret_cast<uint8_t*>(first), last - first);
}

}  // namespace hy::trainer
