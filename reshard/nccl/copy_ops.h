// Copy ops: the unit of device work of the NCCL executor. One op moves one
// piece of a run between two device buffers (a tensor shard and a bucket,
// or two tensor shards), as raw bytes or casting float32 to bf16 with
// round-to-nearest-even exactly as hy::F32BitsToBf16Bits does.
//
// The kernel (pack_kernels.cu) gives each op one warp: a long run is cut
// into pieces of at most kPieceBytes source bytes so that it spreads over
// many warps, and a short run costs one warp, not a block. Within a piece
// the copy is vectorised up to 16 bytes per lane as far as the source and
// destination addresses allow.
//
// Buffers are named by slot: slot s >= 0 is entry s of the launch's pointer
// table (one entry per tensor), kBucketSlot the launch's bucket. Offsets
// are in bytes from the slot's base.
//
// Internal to hy_reshard_nccl and its tests.
// Thread-safety: plain values and pure functions; LaunchCopyOps follows
// CUDA's rules for launches on a stream.

#ifndef HY_RESHARD_NCCL_COPY_OPS_H_
#define HY_RESHARD_NCCL_COPY_OPS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hy/common/status.h"

namespace hy::reshard::nccl_internal {

enum class CopyKind : int32_t { kBytes = 0, kCastF32ToBf16 = 1 };

// Laid out identically on host and device.
struct CopyOp {
  int64_t src_offset = 0;  // Bytes from the source slot's base.
  int64_t dst_offset = 0;  // Bytes from the destination slot's base.
  int64_t count = 0;       // kBytes: bytes; kCastF32ToBf16: elements.
  int32_t src_slot = 0;
  int32_t dst_slot = 0;
  CopyKind kind = CopyKind::kBytes;
  int32_t reserved = 0;
};
static_assert(sizeof(CopyOp) == 40, "CopyOp is shared with device code");

inline constexpr int32_t kBucketSlot = -1;
// Source bytes per op at most; a multiple of 16 so that every piece of a
// run starts as aligned as the run does.
inline constexpr int64_t kPieceBytes = 8192;
// Alignment of every run within a bucket.
inline constexpr int64_t kBucketAlign = 16;

inline int64_t AlignUp(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

// Appends the ops that move `count` elements from byte `src_offset` of
// src_slot to byte `dst_offset` of dst_slot: elements of `elem_size` bytes
// copied as they are, or (cast) float32 elements written as bf16.
// REQUIRES: elem_size > 0; elem_size == 4 when cast.
void AppendCopy(int32_t src_slot, int64_t src_offset, int32_t dst_slot,
                int64_t dst_offset, int64_t count, int elem_size, bool cast,
                std::vector<CopyOp>* ops);

// What the kernel does, on host memory: the reference for tests.
void ApplyCopyOpsOnHost(const CopyOp* ops, size_t num_ops,
                        const uint8_t* const* src_bases,
                        uint8_t* const* dst_bases, const uint8_t* src_bucket,
                        uint8_t* dst_bucket);

// Enqueues ops[0, num_ops) on `stream` (a cudaStream_t; null: the legacy
// default stream). `ops`, `src_bases` and `dst_bases` are device arrays;
// the bases and buckets are device pointers. Returns Internal if the launch
// fails. Defined only in builds with CUDA.
Status LaunchCopyOps(const CopyOp* ops, int64_t num_ops,
                     const uint8_t* const* src_bases, uint8_t* const* dst_bases,
                     const uint8_t* src_bucket, uint8_t* dst_bucket,
                     void* stream);

// `length` elements from element `src_offset` of one buffer to element
// `dst_offset` of another.
struct CopyRun {
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
  int64_t length = 0;
};

// One-shot form of the kernel for tests and tools: on the current device,
// copies every run from device buffer `src` to device buffer `dst`
// (elements of elem_size bytes, or float32 in and bf16 out when cast) and
// waits. Pack is src = a shard, dst = a bucket; unpack the reverse.
// REQUIRES: no two runs write the same destination element (they run in
// parallel, in no order; a plan's runs never overlap).
// Returns InvalidArgument for elem_size < 1, cast with elem_size != 4, or a
// negative offset or length; Unavailable without a GPU or CUDA build;
// Internal for a CUDA error.
Status GpuCopyRuns(const void* src, void* dst, const std::vector<CopyRun>& runs,
                   int elem_size, bool cast);

}  // namespace hy::reshard::nccl_internal

#endif  // HY_RESHARD_NCCL_COPY_OPS_H_
