#include "copy_ops.h"

#include <algorithm>
#include <cstring>

#include "hy/common/bf16.h"

namespace hy::reshard::nccl_internal {

void AppendCopy(int32_t src_slot, int64_t src_offset, int32_t dst_slot,
                int64_t dst_offset, int64_t count, int elem_size, bool cast,
                std::vector<CopyOp>* ops) {
  if (count <= 0) return;
  CopyOp op;
  op.src_slot = src_slot;
  op.dst_slot = dst_slot;
  if (cast) {
    constexpr int64_t kPiece = kPieceBytes / 4;  // float32 elements
    op.kind = CopyKind::kCastF32ToBf16;
    for (int64_t done = 0; done < count; done += kPiece) {
      op.src_offset = src_offset + done * 4;
      op.dst_offset = dst_offset + done * 2;
      op.count = std::min(kPiece, count - done);
      ops->push_back(op);
    }
    return;
  }
  const int64_t bytes = count * elem_size;
  op.kind = CopyKind::kBytes;
  for (int64_t done = 0; done < bytes; done += kPieceBytes) {
    op.src_offset = src_offset + done;
    op.dst_offset = dst_offset + done;
    op.count = std::min(kPieceBytes, bytes - done);
    ops->push_back(op);
  }
}

void ApplyCopyOpsOnHost(const CopyOp* ops, size_t num_ops,
                        const uint8_t* const* src_bases,
                        uint8_t* const* dst_bases, const uint8_t* src_bucket,
                        uint8_t* dst_bucket) {
  for (size_t i = 0; i < num_ops; ++i) {
    const CopyOp& op = ops[i];
    const uint8_t* src =
        (op.src_slot == kBucketSlot ? src_bucket : src_bases[op.src_slot]) +
        op.src_offset;
    uint8_t* dst =
        (op.dst_slot == kBucketSlot ? dst_bucket : dst_bases[op.dst_slot]) +
        op.dst_offset;
    if (op.kind == CopyKind::kCastF32ToBf16) {
      CastF32ToBf16(src, dst, static_cast<size_t>(op.count));
    } else {
      std::memcpy(dst, src, static_cast<size_t>(op.count));
    }
  }
}

}  // namespace hy::reshard::nccl_internal
