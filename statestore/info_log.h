// InfoLog: the RocksDB info log (LOG) of a writable store, written so that a
// failed write can never stop the process.
//
// RocksDB's own file logger (7.8, as Debian ships it with its assertions on)
// aborts the process when it writes again after a failed write: once a full
// disk has refused one line, the next line, at the latest the one DB::Close
// writes, fails `sync_without_flush_called_` in WritableFileWriter. A store
// on a disk that fills must report the error and stay usable (and closable),
// so stores log through this instead: plain stdio, one previous log kept as
// LOG.old, and after a failed write the log falls silent rather than fail.
//
// Thread-safety: Logv may be called from any thread (RocksDB's background
// threads do); a mutex serializes the writes.

#ifndef HY_STATESTORE_INFO_LOG_H_
#define HY_STATESTORE_INFO_LOG_H_

#include <rocksdb/env.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

namespace hy::statestore {

class InfoLog : public rocksdb::Logger {
 public:
  // Starts `dir`/LOG afresh (the previous one becomes LOG.old). A log that
  // cannot be created is no error: the logger then writes nothing.
  static std::shared_ptr<rocksdb::Logger> Open(const std::string& dir);

  ~InfoLog() override;

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;
  size_t GetLogFileSize() const override;

 private:
  explicit InfoLog(std::FILE* file) : file_(file) {}
  rocksdb::Status CloseImpl() override;

  mutable std::mutex mu_;
  std::FILE* file_;  // Null once closed or after a failed write.
  size_t size_ = 0;
};

}  // namespace hy::statestore

#endif  // HY_STATESTORE_INFO_LOG_H_
