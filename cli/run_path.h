// What a path handed to hyctl names, for the commands that need a run
// root (the node-<k>/ directories hyctl train writes: train --resume). A
// path of another kind, such as a single store, is named as such
// (InvalidArgument: a usage error) before anything is read from it or
// created in it, instead of failing later as if data were missing.
//
// Thread-safety: plain functions; they only look at the file system.

#ifndef HY_CLI_RUN_PATH_H_
#define HY_CLI_RUN_PATH_H_

#include <string>

#include "hy/common/status.h"

namespace hy::cli {

// OK when `path` is a run root. Otherwise NotFound when it does not exist
// or holds no node-<k> directory, InvalidArgument when it is a single
// store ("P is a single store, not a run root; pass the run root R that
// holds it" when it lies in one). Creates and opens nothing.
Status CheckRunRoot(const std::string& path);

}  // namespace hy::cli

#endif  // HY_CLI_RUN_PATH_H_
