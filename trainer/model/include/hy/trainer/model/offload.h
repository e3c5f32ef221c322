// OffloadedTensor: a flat tensor whose memory is a shared mapping of a file
// on local disk, for state that is read now and then and not needed in
// between (the frozen reference model's piece, used by the experience
// phase only; the rollout engine's bf16 weights, idle from the end of
// generation to the next sync). Release() hands its pages back to the kernel
// (MADV_PAGEOUT: reclaimed, written to the file first where dirty; then
// MADV_DONTNEED, so none stays mapped), so they count neither in this process's
// resident set nor as memory the machine must keep (the page cache may hold
// them until it needs the room); the next access reads them back. Like
// DeepSpeed's parameter offload to NVMe, without an explicit copy: the page
// cache does the moving.
//
// The file is created in `dir` and unlinked at once: it lives while the
// mapping does, and nothing is left behind by a crash. The object owns one
// reference to the mapping; the tensor (and its copies) own others, and the
// mapping is unmapped when the last goes.
//
// Part of hy_trainer_model (LibTorch; ppo/ uses it). Thread-safety: Release may
// run while others read the tensor (a read faults the page back in); values are
// never lost.

#ifndef HY_TRAINER_MODEL_OFFLOAD_H_
#define HY_TRAINER_MODEL_OFFLOAD_H_

#include <ATen/ATen.h>

#include <string>

#include "hy/common/bytes.h"
#include "hy/common/result.h"

namespace hy::trainer {

class OffloadedTensor {
 public:
  // A zero-filled [numel] tensor of `dtype` on a new file in `dir` (no
  // file for numel 0). Returns IOError naming the file and the system's
  // error if it cannot be created, sized (disk full) or mapped.
  // REQUIRES: numel >= 0.
  static Result<OffloadedTensor> Create(const std::string& dir, int64_t numel,
                                        at::ScalarType dtype = at::kFloat);

  const at::Tensor& tensor() const { return tensor_; }
  // Hands the pages back to the kernel (see above). Returns IOError with
  // the system's error if the kernel refuses both ways; the values stay.
  Status Release() const;
  // Release() for the whole pages inside `range` only (the pages it shares
  // with bytes outside stay): for handing pages back as a reader goes.
  // Returns InvalidArgument if `range` is not within tensor()'s bytes,
  // IOError as Release does.
  Status ReleaseRange(ConstBytes range) const;

 private:
  at::Tensor tensor_;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_MODEL_OFFLOAD_H_
