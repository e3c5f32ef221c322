// The shared-memory file through which a host's trainer ranks hand the
// actor's weights to the vLLM engines on that host (python/hy_vllm's
// `hy_shm` backend maps the same file and loads views of it, no copy):
// its layout (WeightFileLayout), the manifest the engine is sent with each
// update, and the file itself. The protocol (layout, manifest, naming,
// how this writer differs from hystate.vllm's): docs/weight-sync.md.
//
// Ownership: the rank that creates the file (Create) unlinks it when its
// SharedWeightFile is destroyed; the others (Open) only unmap.
// Thread-safety: the mapping is plain memory; distinct ranks write
// disjoint ranges (reshard/shared_destination.h).

#ifndef HY_TRAINER_VLLM_WEIGHT_FILE_H_
#define HY_TRAINER_VLLM_WEIGHT_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/dtype.h"
#include "hy/common/result.h"
#include "hy/common/tensor_meta.h"

namespace hy::trainer {

struct WeightFileEntry {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct WeightFileLayout {
  DType dtype = DType::kBF16;
  std::vector<WeightFileEntry> tensors;  // One per model tensor, in order.
  // Extra names for bytes already listed (lm_head.weight of a tied model).
  std::vector<WeightFileEntry> aliases;
  uint64_t size = 0;  // Bytes of the file.

  std::string ManifestJson() const;
};

// REQUIRES: dtype is kBF16 or kF32. `tied`: add lm_head.weight as an alias
// of model.embed_tokens.weight (InvalidArgument if that is missing).
Result<WeightFileLayout> LayoutWeightFile(const std::vector<TensorMeta>& model,
                                          bool tied, DType dtype);

// "bfloat16" / "float32" (rollout.vllm.dtype) to a DType.
Result<DType> EngineDType(const std::string& name);

class SharedWeightFile {
 public:
  // Creates `path` (replacing a leftover), sizes it and maps it.
  static Result<std::unique_ptr<SharedWeightFile>> Create(
      const std::string& path, uint64_t size);
  // Maps an existing file of at least `size` bytes (FailedPrecondition if
  // it is shorter: not made for this layout).
  static Result<std::unique_ptr<SharedWeightFile>> Open(
      const std::string& path, uint64_t size);
  ~SharedWeightFile();

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  MutableBytes bytes(uint64_t offset, uint64_t length) const;

 private:
  SharedWeightFile(std::string path, uint8_t* data, uint64_t size, bool owner)
      : path_(std::move(path)), data_(data), size_(size), owner_(owner) {}
  std::string path_;
  uint8_t* data_;
  uint64_t size_;
  bool owner_;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_VLLM_WEIGHT_FILE_H_
