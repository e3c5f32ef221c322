// Status -> Python exception (see errors.h).

#include "errors.h"

#include <map>
#include <string>

namespace hy::python {

namespace py = pybind11;

namespace {

// Owned by the module (kept alive by its attributes).
PyObject* g_base = nullptr;
std::map<StatusCode, PyObject*>* g_by_code = nullptr;

constexpr StatusCode kCodes[] = {
    StatusCode::kInvalidArgument,  StatusCode::kNotFound,
    StatusCode::kAlreadyExists,    StatusCode::kFailedPrecondition,
    StatusCode::kDataLoss,         StatusCode::kIOError,
    StatusCode::kUnavailable,      StatusCode::kAborted,
    StatusCode::kInternal,         StatusCode::kResourceExhausted,
    StatusCode::kDeadlineExceeded,
};

// What each exception means to a caller (the API reference shows it).
const char* DocOf(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return "An argument or input that does not fit (a layout, shape, dtype "
             "or state the call cannot take); also a ValueError. Raised "
             "before anything is written.";
    case StatusCode::kNotFound:
      return "A step, tensor, value, store or directory that does not "
             "exist; also a LookupError.";
    case StatusCode::kAlreadyExists:
      return "A step or version id that is taken already.";
    case StatusCode::kFailedPrecondition:
      return "The state does not allow the call (e.g. one rank's store "
             "where a whole model is needed).";
    case StatusCode::kDataLoss:
      return "Stored data is damaged or truncated: a checksum failed. The "
             "message names the chunk; nothing wrong is ever returned (hyctl "
             "repair restores it from a replica).";
    case StatusCode::kIOError:
      return "The filesystem failed; also an OSError.";
    case StatusCode::kUnavailable:
      return "A peer rank or service went away.";
    case StatusCode::kAborted:
      return "A collective save was abandoned on every rank because some "
             "rank's part failed; the step is on no store.";
    case StatusCode::kInternal:
      return "A bug in hy: please report it with the message.";
    case StatusCode::kResourceExhausted:
      return "Out of a resource, e.g. no space left on the device.";
    case StatusCode::kDeadlineExceeded:
      return "A wait timed out (a peer rank or a store did not answer).";
    default:
      return "An hy status that is not OK.";
  }
}

}  // namespace

void RegisterErrors(py::module_& m) {
  const std::string module = "hystate";  // The package users import.
  g_base = PyErr_NewExceptionWithDoc(
      (module + ".Error").c_str(),
      "An hy status that is not OK; .code names it (e.g. 'DataLoss').",
      PyExc_RuntimeError, nullptr);
  PyObject_SetAttrString(g_base, "code", py::str("Unknown").ptr());
  m.attr("Error") = py::handle(g_base);
  g_by_code = new std::map<StatusCode, PyObject*>();
  for (StatusCode code : kCodes) {
    const std::string name(StatusCodeName(code));
    const char* doc = DocOf(code);
    // OSError, LookupError, ValueError as bases too, where they fit.
    py::object bases = py::reinterpret_borrow<py::object>(g_base);
    if (code == StatusCode::kIOError || code == StatusCode::kNotFound ||
        code == StatusCode::kInvalidArgument) {
      PyObject* builtin = code == StatusCode::kIOError    ? PyExc_OSError
                          : code == StatusCode::kNotFound ? PyExc_LookupError
                                                          : PyExc_ValueError;
      bases = py::make_tuple(py::handle(g_base), py::handle(builtin));
    }
    PyObject* cls = PyErr_NewExceptionWithDoc((module + "." + name).c_str(),
                                              doc, bases.ptr(), nullptr);
    PyObject_SetAttrString(cls, "code", py::str(name).ptr());
    m.attr(name.c_str()) = py::handle(cls);
    (*g_by_code)[code] = cls;
  }
}

void ThrowStatus(const Status& s) {
  PyObject* cls = g_base;
  auto it = g_by_code->find(s.code());
  if (it != g_by_code->end()) cls = it->second;
  py::object err = py::reinterpret_steal<py::object>(
      PyObject_CallFunction(cls, "s", std::string(s.message()).c_str()));
  if (!err) throw py::error_already_set();
  err.attr("code") = py::str(std::string(StatusCodeName(s.code())));
  PyErr_SetObject(cls, err.ptr());
  throw py::error_already_set();
}

}  // namespace hy::python
