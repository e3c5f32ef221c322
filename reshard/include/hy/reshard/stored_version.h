// Offline resharding of a version held whole in one store: its tensors read
// back in model order, cut for another layout, and committed as a new
// version (what `hyctl reshard` and Python's `hy.reshard` do).
//
// The tensor order a layout's FSDP flattening follows (layout.h) is, for a
// stored version, the order its "reshard.tensor_order" blob lists; without
// that blob, names in natural order (digit runs compared as numbers, so
// layer 2 comes before layer 10). ReshardStoredVersion writes the blob into
// every version it commits.
//
// Thread-safety: plain functions; they use the Store's thread-safe calls.

#ifndef HY_RESHARD_STORED_VERSION_H_
#define HY_RESHARD_STORED_VERSION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/tensor_meta.h"
#include "hy/reshard/layout.h"
#include "hy/reshard/model_spec.h"
#include "hy/statestore/store.h"

namespace hy::reshard {

// The name of the blob that records a version's tensor order: a JSON array
// of tensor names, replicated.
inline constexpr const char* kTensorOrderBlob = "reshard.tensor_order";

// True if `a` sorts before `b` in natural order: runs of digits compare as
// numbers ("layers.2" < "layers.10"), everything else byte by byte; names
// that compare equal that way ("1" and "01") fall back to byte order.
bool NaturalLess(const std::string& a, const std::string& b);

// `tensors` stably sorted by NaturalLess of their names.
std::vector<TensorMeta> InNaturalOrder(std::vector<TensorMeta> tensors);

// The tensors of committed `version` (whose manifest is `manifest`) in model
// order: as its tensor order blob lists them, else natural order. Returns
// DataLoss if the blob is not a JSON array naming each tensor exactly once,
// or what ReadBlob returns other than NotFound.
Result<std::vector<TensorMeta>> StoredTensors(
    statestore::Store* store, uint64_t version,
    const statestore::Manifest& manifest);

// The JSON text of the tensor order blob for `spec`.
std::string TensorOrderJson(const ModelSpec& spec);

struct ReshardedVersion {
  uint64_t version = 0;  // The version committed.
  std::string from;      // The source's recorded layout ("" if none).
  int from_world = 0;    // The source's world size.
  size_t tensors = 0;
  statestore::SaveStats stats;  // Summed over the new parts.
  // Per-rank blobs not carried over, as "rank 1's blob 'rng'".
  std::vector<std::string> dropped_blobs;
};

// Commits version `version` of `store` cut for layout `to` as a new
// version: `new_version`, else the one after every version the store knows.
// `rules` are the split rules (null: the version's recorded rules, else the
// shipped defaults). Replicated blobs carry over; per-rank blobs cannot
// (named in dropped_blobs). Everything about the input is checked before
// the first write, and a failed write aborts the new version, so no half
// version stays behind.
// Returns NotFound for an unknown version, FailedPrecondition for a per-rank
// store's part of a group commit (reshard needs a store holding every
// rank), FailedPrecondition from Save on a read-only store, AlreadyExists if
// new_version exists, InvalidArgument for tensors the rules or layout do not
// fit, DataLoss for damaged data, IOError from the disk.
Result<ReshardedVersion> ReshardStoredVersion(
    statestore::Store* store, uint64_t version, const Layout& to,
    const ModelRules* rules, std::optional<uint64_t> new_version);

}  // namespace hy::reshard

#endif  // HY_RESHARD_STORED_VERSION_H_
