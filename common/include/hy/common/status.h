// Status: the outcome of an operation, an error code plus a message.
//
// hy reports errors as values, never as exceptions across module boundaries.
// Adapters that meet a foreign error type (rocksdb::Status, c10::Error, zstd
// error codes) convert it to a Status right there. The codes follow absl's
// canonical codes so that their meaning is familiar:
//
//   kInvalidArgument    the caller passed something malformed
//   kNotFound           a named thing (version, tensor, chunk) does not exist
//   kAlreadyExists      creating something that is already there
//   kFailedPrecondition the system is not in a state where this can run
//   kDataLoss           stored bytes are corrupt or truncated
//   kIOError            the operating system or storage engine failed
//   kUnavailable        a peer or device cannot be reached (retry may help)
//   kAborted            a concurrent operation made this one give up
//   kInternal           an invariant of hy itself is broken (a bug)
//   kResourceExhausted  out of memory, staging space, or a configured budget
//   kDeadlineExceeded   a wait for peers (a collective, a commit) timed out
//
// Thread-safety: a Status is a value; distinct objects may be used from
// different threads, a const Status from many.

#ifndef HY_COMMON_STATUS_H_
#define HY_COMMON_STATUS_H_

#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace hy {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kNotFound = 2,
  kAlreadyExists = 3,
  kFailedPrecondition = 4,
  kDataLoss = 5,
  kIOError = 6,
  kUnavailable = 7,
  kAborted = 8,
  kInternal = 9,
  kResourceExhausted = 10,
  kDeadlineExceeded = 11,  // A wait (collective, peer, lock) timed out.
};

// Returns the code's name without the leading 'k', e.g. "DataLoss".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // An OK status. Costs one null pointer; copying an OK status allocates
  // nothing.
  Status() noexcept = default;
  Status(StatusCode code, std::string_view message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&& other) noexcept = default;
  Status& operator=(Status&& other) noexcept = default;
  ~Status() = default;

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string_view msg) {
    return Status(StatusCode::kInvalidArgument, msg);
  }
  static Status NotFound(std::string_view msg) {
    return Status(StatusCode::kNotFound, msg);
  }
  static Status AlreadyExists(std::string_view msg) {
    return Status(StatusCode::kAlreadyExists, msg);
  }
  static Status FailedPrecondition(std::string_view msg) {
    return Status(StatusCode::kFailedPrecondition, msg);
  }
  static Status DataLoss(std::string_view msg) {
    return Status(StatusCode::kDataLoss, msg);
  }
  static Status IOError(std::string_view msg) {
    return Status(StatusCode::kIOError, msg);
  }
  static Status Unavailable(std::string_view msg) {
    return Status(StatusCode::kUnavailable, msg);
  }
  static Status Aborted(std::string_view msg) {
    return Status(StatusCode::kAborted, msg);
  }
  static Status Internal(std::string_view msg) {
    return Status(StatusCode::kInternal, msg);
  }
  static Status ResourceExhausted(std::string_view msg) {
    return Status(StatusCode::kResourceExhausted, msg);
  }
  static Status DeadlineExceeded(std::string_view msg) {
    return Status(StatusCode::kDeadlineExceeded, msg);
  }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // Empty for OK.
  std::string_view message() const {
    return rep_ ? std::string_view(rep_->message) : std::string_view();
  }

  bool IsInvalidArgument() const {
    return code() == StatusCode::kInvalidArgument;
  }
  bool IsNotFound() const { return code() == StatusCode::kNotFound; }
  bool IsDataLoss() const { return code() == StatusCode::kDataLoss; }

  // Returns a copy whose message is "<context>: <message>"; OK stays OK.
  Status WithContext(std::string_view context) const;

  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;

  // Marks a status as deliberately ignored.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }
  friend bool operator!=(const Status& a, const Status& b) { return !(a == b); }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;  // nullptr means OK.
};

std::ostream& operator<<(std::ostream& os, const Status& s);

}  // namespace hy

// Evaluates `expr` (a Status); returns it from the enclosing function if it is
// not OK.
#define HY_RETURN_IF_ERROR(expr)                     \
  do {                                               \
    ::hy::Status hy_status_tmp_ = (expr);            \
    if (!hy_status_tmp_.ok()) return hy_status_tmp_; \
  } while (0)

#endif  // HY_COMMON_STATUS_H_
