// Internal helpers shared by safetensors_read.cc and safetensors_write.cc.

#ifndef HY_STATESTORE_SAFETENSORS_INTERNAL_H_
#define HY_STATESTORE_SAFETENSORS_INTERNAL_H_

#include <errno.h>

#include <cstring>
#include <string>
#include <string_view>

#include "hy/common/status.h"

namespace hy::statestore::internal {

// A failed system call as a Status: NotFound for ENOENT, IOError otherwise.
inline Status ErrnoStatus(const std::string& what, int err) {
  const std::string msg = what + ": " + std::strerror(err);
  return err == ENOENT ? Status::NotFound(msg) : Status::IOError(msg);
}

// `name` in single quotes, for error messages.
inline std::string Quote(std::string_view name) {
  return "'" + std::string(name) + "'";
}

}  // namespace hy::statestore::internal

#endif  // HY_STATESTORE_SAFETENSORS_INTERNAL_H_
