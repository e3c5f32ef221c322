// InfoLog (see info_log.h).

#include "info_log.h"

#include <sys/time.h>

#include <cstdarg>
#include <ctime>
#include <filesystem>

namespace hy::statestore {

std::shared_ptr<rocksdb::Logger> InfoLog::Open(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);  // RocksDB creates a new store's later.
  const fs::path log = fs::path(dir) / "LOG";
  if (fs::exists(log, ec)) fs::rename(log, fs::path(dir) / "LOG.old", ec);
  std::FILE* f = std::fopen(log.c_str(), "ae");
  std::shared_ptr<InfoLog> logger(new InfoLog(f));
  logger->SetInfoLogLevel(rocksdb::InfoLogLevel::INFO_LEVEL);
  return logger;
}

InfoLog::~InfoLog() {
  if (!closed_) CloseImpl().PermitUncheckedError();
}

rocksdb::Status InfoLog::CloseImpl() {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ != nullptr) std::fclose(file_);  // A failed close loses a line.
  file_ = nullptr;
  return rocksdb::Status::OK();
}

void InfoLog::Logv(const char* format, va_list ap) {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ == nullptr) return;
  struct timeval now;
  gettimeofday(&now, nullptr);
  struct tm t;
  localtime_r(&now.tv_sec, &t);
  char stamp[40];
  const int stamp_len = std::snprintf(stamp, sizeof(stamp), "%04d/%02d/%02d-%02d:%02d:%02d.%06ld ",
                t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour,
                t.tm_min, t.tm_sec, static_cast<long>(now.tv_usec));
  int n = std::fputs(stamp, file_) < 0 ? -1 : 0;
  if (n >= 0) n = std::vfprintf(file_, format, ap);
  if (n >= 0) n = std::fputc('\n', file_) == EOF ? -1 : n;
  // Flushed per line, as RocksDB's logger does: the log is read after a
  // crash.
  if (n < 0 || std::fflush(file_) != 0) {
    std::fclose(file_);  // The disk is full, say: the log falls silent.
    file_ = nullptr;
    return;
  }
  size_ += static_cast<size_t>(n + 1 + stamp_len);
}

size_t InfoLog::GetLogFileSize() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size_;
}

}  // namespace hy::statestore
