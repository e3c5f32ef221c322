// hy's Status as Python exceptions: hy.Error (with .code, the StatusCode
// name) and one subclass per code (hy.DataLoss, hy.NotFound, ...).
//
// Thread-safety: RegisterErrors once at import; Throw* with the GIL held.
#ifndef HY_PYTHON_ERRORS_H_
#define HY_PYTHON_ERRORS_H_

#include <pybind11/pybind11.h>

#include "hy/common/result.h"

namespace hy::python {

// Adds Error and its subclasses to `m`.
void RegisterErrors(pybind11::module_& m);

// Raises the exception of s.code() with s's message.
// REQUIRES: !s.ok().
[[noreturn]] void ThrowStatus(const Status& s);

inline void Check(const Status& s) {
  if (!s.ok()) ThrowStatus(s);
}

template <typename T>
T Unwrap(Result<T> r) {
  if (!r.ok()) ThrowStatus(r.status());
  return std::move(r).value();
}

}  // namespace hy::python

#endif  // HY_PYTHON_ERRORS_H_
