// StateSource: one committed state that hyctl reads tensors from, whether
// it lives in a single store (a version) or in a run root that
// `hyctl train` wrote (a step, assembled from every old rank's store or
// replica by checkpoint::CheckpointReader). `hyctl export` and `hyctl diff`
// take either.
//
// Thread-safety: one thread.

#ifndef HY_CLI_STATE_SOURCE_H_
#define HY_CLI_STATE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/result.h"
#include "hy/common/shard.h"
#include "hy/common/tensor_meta.h"
#include "version_select.h"

namespace hy::cli {

class StateSource {
 public:
  virtual ~StateSource() = default;

  // "store S step N" or "run root R step N".
  virtual std::string Describe() const = 0;
  virtual std::vector<TensorMeta> Tensors() const = 0;  // By name.
  // Elements [region.offset, region.end()) of the flattened tensor.
  // Returns NotFound for an unknown tensor, DataLoss for damaged data.
  virtual Status ReadRegion(const std::string& tensor, FlatRun region,
                            MutableBytes out) = 0;
  // A blob of the state (replicated), or NotFound.
  virtual Result<std::string> ReadBlob(const std::string& name) = 0;
};

// Opens `path` at the state `choice` names: a run root (node-<k>/
// directories) at a step (default: the newest step every old rank's part
// survives), or a store at a step or version id (ChooseVersion; default:
// its newest committed version). Returns NotFound when there is no such
// store, root or step, InvalidArgument for a version id on a run root or a
// store that holds only some ranks of a run (CheckWholeStore),
// FailedPrecondition for a run root whose stores belong to two runs unless
// allow_other_run, or the opening error.
Result<std::unique_ptr<StateSource>> OpenStateSource(
    const std::string& path, const VersionChoice& choice,
    bool allow_other_run = false);

}  // namespace hy::cli

#endif  // HY_CLI_STATE_SOURCE_H_
