// Result<T>: either a value of type T or a non-OK Status explaining why there
// is none (absl::StatusOr in spirit).
//
//   Result<Manifest> r = store->ReadManifest(v);
//   if (!r.ok()) return r.status();
//   Use(*r);
//
// or, inside a function returning Status or Result<U>:
//
//   HY_ASSIGN_OR_RETURN(Manifest m, store->ReadManifest(v));
//
// Accessing the value of a Result that holds an error aborts the process: it
// is a programming error, like dereferencing a null pointer.
//
// Thread-safety: as for T.

#ifndef HY_COMMON_RESULT_H_
#define HY_COMMON_RESULT_H_

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <type_traits>
#include <utility>

#include "hy/common/status.h"

namespace hy {

template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::decay_t<T>, Status>,
                "Result<Status> is meaningless; return Status");

 public:
  // REQUIRES: !status.ok(). An OK status without a value becomes kInternal.
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit
    if (status_.ok()) {
      status_ = Status::Internal("Result constructed from an OK Status");
    }
  }
  Result(const T& value) : value_(value) {}        // NOLINT: implicit
  Result(T&& value) : value_(std::move(value)) {}  // NOLINT: implicit

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  const T& value() const& {
    CheckOk();
    return *value_;
  }
  T& value() & {
    CheckOk();
    return *value_;
  }
  T&& value() && {
    CheckOk();
    return std::move(*value_);
  }

  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  // Returns the value, or `fallback` if this holds an error.
  T value_or(T fallback) const& { return ok() ? *value_ : std::move(fallback); }

 private:
  void CheckOk() const {
    if (!value_.has_value()) {
      std::fprintf(stderr, "hy: value() of a Result holding %s\n",
                   status_.ToString().c_str());
      std::abort();
    }
  }

  Status status_;  // OK iff value_ holds a value.
  std::optional<T> value_;
};

}  // namespace hy

#define HY_CONCAT_INNER_(a, b) a##b
#define HY_CONCAT_(a, b) HY_CONCAT_INNER_(a, b)

// HY_ASSIGN_OR_RETURN(lhs, rexpr): evaluates rexpr (a Result<T>); on error
// returns its Status from the enclosing function, else moves the value into
// lhs, which may be a declaration (`auto x`) or an existing lvalue.
#define HY_ASSIGN_OR_RETURN(lhs, rexpr) \
  HY_ASSIGN_OR_RETURN_IMPL_(HY_CONCAT_(hy_result_tmp_, __LINE__), lhs, rexpr)

#define HY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                              \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#endif  // HY_COMMON_RESULT_H_
