// SpillFile: a scratch file on local disk that memory is written out to
// and read back from; ParkedBuckets: the executor's buckets kept in one
// while it is parked (Executor::Park). It is created in a
// given directory and unlinked at once, so it lives only as long as the
// object and a crash leaves nothing behind.
//
// Internal to hy_reshard. Thread-safety: one thread at a time.

#ifndef HY_RESHARD_SPILL_FILE_H_
#define HY_RESHARD_SPILL_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/result.h"
#include "wire.h"

namespace hy::reshard::internal {

class SpillFile {
 public:
  // A new, empty, already unlinked file in `dir`. Returns IOError naming
  // the file and the system's error if it cannot be created.
  static Result<std::unique_ptr<SpillFile>> Create(const std::string& dir);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  // Appends `data`; *offset gets where it starts. Returns IOError (disk
  // full, ...) naming the file.
  Status Append(ConstBytes data, int64_t* offset);
  // Reads out.size() bytes at `offset` into out. Returns IOError, or
  // DataLoss if the file is shorter.
  Status Read(int64_t offset, MutableBytes out) const;

 private:
  SpillFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;  // As created; no longer in the directory.
  int64_t size_ = 0;
};

// The executor's buckets ([step][peer]) while it is parked: each that was
// a previous copy, in a SpillFile.
class ParkedBuckets {
 public:
  // Writes each bucket whose size is sizes[k][p] (others are no previous
  // copy) to a new file in `dir`, then frees every bucket. Returns the
  // file's IOError; the buckets are freed all the same.
  static Result<ParkedBuckets> Park(
      const std::string& dir, const std::vector<std::vector<size_t>>& sizes,
      std::vector<std::vector<WireBuffer>>* buckets);

  // Reads the parked buckets back into *buckets (the same grid). Returns
  // the file's IOError or DataLoss.
  Status Restore(std::vector<std::vector<WireBuffer>>* buckets) const;

 private:
  std::unique_ptr<SpillFile> file_;
  std::vector<std::vector<int64_t>> at_, size_;  // -1: not parked.
};

}  // namespace hy::reshard::internal

#endif  // HY_RESHARD_SPILL_FILE_H_
