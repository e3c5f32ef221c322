// DataCursor: the order prompts are consumed in, and how far a run got, in a
// form a checkpoint stores and a resumed run restores.
//
// The stream. Epoch e is a permutation of the dataset's records: a
// Fisher-Yates shuffle drawing from a counter-based generator (splitmix64
// over (seed, e)), or the file order when shuffling is off. The stream is
// epoch 0, then epoch 1, ... concatenated; stream position p holds record
// EpochOrder(size, seed, p / size)[p % size]. An iteration with batch size B
// takes positions [consumed, consumed + B); sample j of the batch (its
// GLOBAL index, whatever rank generates it) is position consumed + j. So
// the record a sample gets depends on (seed, dataset, position) only, never
// on the world size or the rank, and a run resumed on any world size
// continues with the next unseen prompts: none repeats, none is skipped.
//
// The position. DataPosition is the "consumed prompts" counter plus what
// identifies the order (seed, shuffle, dataset size and fingerprint);
// Encode / DecodeDataPosition turn it into a short JSON string for the
// checkpoint.
//
// Thread-safety: the free functions are pure. A DataCursor caches the
// permutation of the epoch it last read and is not thread-safe.

#ifndef HY_TRAINER_DATA_DATA_CURSOR_H_
#define HY_TRAINER_DATA_DATA_CURSOR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/hash.h"
#include "hy/common/result.h"
#include "hy/common/status.h"

namespace hy::trainer {

// The record order of epoch `epoch`: a permutation of [0, size), the
// identity when !shuffle. O(size) time and memory.
std::vector<uint64_t> EpochOrder(uint64_t size, uint64_t seed, uint64_t epoch,
                                 bool shuffle);

struct DataPosition {
  uint64_t consumed = 0;  // Prompts taken so far, over all epochs.
  uint64_t seed = 0;
  bool shuffle = true;
  uint64_t dataset_size = 0;
  Hash128 fingerprint;  // PromptDataset::fingerprint().

  friend bool operator==(const DataPosition& a, const DataPosition& b) {
    return a.consumed == b.consumed && a.seed == b.seed &&
           a.shuffle == b.shuffle && a.dataset_size == b.dataset_size &&
           a.fingerprint == b.fingerprint;
  }
};

// {"version":1,"consumed":..,"seed":..,"shuffle":..,"dataset_size":..,
//  "fingerprint":"<32 hex digits>"}
std::string EncodeDataPosition(const DataPosition& position);

// The inverse of EncodeDataPosition. Returns DataLoss when `text` is not
// such a JSON object (a missing or mistyped field, a bad fingerprint) and
// InvalidArgument for a version this build does not read.
Result<DataPosition> DecodeDataPosition(std::string_view text);

class DataCursor {
 public:
  // A cursor at the start of the stream.
  // REQUIRES: dataset_size > 0.
  DataCursor(uint64_t dataset_size, const Hash128& fingerprint, uint64_t seed,
             bool shuffle);

  // The record at stream position `position`.
  uint64_t RecordAt(uint64_t position);

  // The records of the next `batch_size` positions, [consumed,
  // consumed + batch_size), without consuming them.
  std::vector<uint64_t> PeekBatch(uint64_t batch_size);

  // Marks `n` more prompts as consumed (after the iteration using them).
  void Advance(uint64_t n) { position_.consumed += n; }

  uint64_t consumed() const { return position_.consumed; }
  uint64_t epoch() const { return position_.consumed / position_.dataset_size; }
  const DataPosition& position() const { return position_; }

  // Continues from `saved` (from a checkpoint). Returns FailedPrecondition,
  // naming what differs and keeping this cursor unchanged, when the saved
  // seed, shuffle, dataset size or fingerprint differ from this cursor's,
  // unless `allow_changed_dataset`: then only the consumed counter is taken,
  // and the run goes on at that stream position of the current order.
  Status Restore(const DataPosition& saved, bool allow_changed_dataset);

 private:
  DataPosition position_;
  uint64_t cached_epoch_ = UINT64_MAX;  // The epoch order_ holds, if any.
  std::vector<uint64_t> order_;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_DATA_DATA_CURSOR_H_
