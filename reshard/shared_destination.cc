// RunToSharedDestination (see shared_destination.h).

#include "hy/reshard/shared_destination.h"

#include <chrono>
#include <cstring>
#include <string>

#include "hy/common/bf16.h"

namespace hy::reshard {

Status RunToSharedDestination(const TransferPlan& plan, int rank, int dst_rank,
                              const std::vector<ConstBytes>& src,
                              const std::vector<MutableBytes>& dst,
                              DType dst_dtype, SharedDestinationStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  if (dst_dtype != DType::kF32 && dst_dtype != DType::kBF16) {
    return Status::InvalidArgument(
        "shared destination: dtype must be float32 or bfloat16");
  }
  if (src.size() != dst.size() || src.size() != plan.spec.tensors.size()) {
    return Status::InvalidArgument(
        "shared destination: " + std::to_string(src.size()) + " sources, " +
        std::to_string(dst.size()) + " destinations, plan has " +
        std::to_string(plan.spec.tensors.size()) + " tensors");
  }
  const size_t width = dst_dtype == DType::kF32 ? 4 : 2;
  std::vector<const Transfer*> mine;
  auto take = [&](const Transfer& t) {
    if (t.src_rank == rank && t.dst_rank == dst_rank) mine.push_back(&t);
  };
  for (const Transfer& t : plan.local) take(t);
  for (const Step& s : plan.steps) {
    for (const Transfer& t : s.transfers) take(t);
  }
  for (const Transfer* t : mine) {
    const size_t i = static_cast<size_t>(t->tensor);
    if (t->tensor < 0 || i >= src.size() || t->length < 0 ||
        t->src_offset < 0 || t->dst_offset < 0 ||
        static_cast<uint64_t>(t->src_offset + t->length) * 4 > src[i].size() ||
        static_cast<uint64_t>(t->dst_offset + t->length) * width >
            dst[i].size()) {
      return Status::InvalidArgument(
          "shared destination: a transfer of tensor " +
          std::to_string(t->tensor) + " lies outside its buffers");
    }
  }
  int64_t elements = 0;
  for (const Transfer* t : mine) {
    const size_t i = static_cast<size_t>(t->tensor);
    const uint8_t* from = src[i].data() + t->src_offset * 4;
    uint8_t* to = dst[i].data() + t->dst_offset * static_cast<int64_t>(width);
    if (width == 4) {
      std::memcpy(to, from, static_cast<size_t>(t->length) * 4);
    } else {
      CastF32ToBf16(from, to, static_cast<size_t>(t->length));
    }
    elements += t->length;
  }
  if (stats != nullptr) {
    stats->elements = elements;
    stats->bytes_written = elements * static_cast<int64_t>(width);
    stats->seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
  }
  return Status::OK();
}

}  // namespace hy::reshard
