#include "spill_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hy/common/scratch_file.h"

namespace hy::reshard::internal {
namespace {

Status SystemError(const std::string& what) {
  return Status::IOError(what + ": " + std::strerror(errno));
}

}  // namespace

Result<std::unique_ptr<SpillFile>> SpillFile::Create(const std::string& dir) {
  Result<ScratchFile> file = CreateScratchFile(dir, "reshard-spill");
  if (!file.ok()) return file.status().WithContext("reshard spill");
  return std::unique_ptr<SpillFile>(new SpillFile(file->fd, file->path));
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

Result<ParkedBuckets> ParkedBuckets::Park(
    const std::string& dir, const std::vector<std::vector<size_t>>& sizes,
    std::vector<std::vector<WireBuffer>>* buckets) {
  ParkedBuckets parked;
  Status status;
  Result<std::unique_ptr<SpillFile>> file = SpillFile::Create(dir);
  status = file.status();
  if (file.ok()) parked.file_ = std::move(*file);
  for (size_t k = 0; k < buckets->size(); ++k) {
    parked.at_.emplace_back((*buckets)[k].size(), -1);
    parked.size_.emplace_back((*buckets)[k].size(), 0);
    for (size_t p = 0; p < (*buckets)[k].size(); ++p) {
      WireBuffer& b = (*buckets)[k][p];
      if (status.ok() && b.size() == sizes[k][p]) {
        status = parked.file_->Append(ConstBytes(b.data(), b.size()),
                                      &parked.at_[k][p]);
        parked.size_[k][p] = static_cast<int64_t>(b.size());
      }
      WireBuffer().swap(b);
    }
  }
  if (!status.ok()) return status;
  return parked;
}

Status ParkedBuckets::Restore(
    std::vector<std::vector<WireBuffer>>* buckets) const {
  for (size_t k = 0; k < at_.size(); ++k) {
    for (size_t p = 0; p < at_[k].size(); ++p) {
      if (at_[k][p] < 0) continue;
      WireBuffer& b = (*buckets)[k][p];
      b.resize(static_cast<size_t>(size_[k][p]));
      HY_RETURN_IF_ERROR(
          file_->Read(at_[k][p], MutableBytes(b.data(), b.size())));
    }
  }
  return Status::OK();
}

}  // namespace hy::reshard::internal
