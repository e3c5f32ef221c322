// The copy-op kernel against a plain host loop: random runs of every element
// size, pack and unpack shapes, misaligned buffers, and the f32 -> bf16 cast
// bit-identical to hy::F32BitsToBf16Bits on every rounding edge. Skips
// without a GPU.

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "copy_ops.h"
#include "hy/common/bf16.h"
#include "hy/common/gpu.h"
#include "hy/reshard/nccl_executor.h"

namespace hy::reshard::nccl_internal {
namespace {

#define HY_SKIP_WITHOUT_GPU() \
  if (GpuDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

using Bytes = std::vector<uint8_t>;

// What GpuCopyRuns must do, written without copy ops.
void HostCopyRuns(const uint8_t* src, uint8_t* dst,
                  const std::vector<CopyRun>& runs, int elem_size, bool cast) {
  for (const CopyRun& r : runs) {
    if (!cast) {
      std::memcpy(dst + r.dst_offset * elem_size,
                  src + r.src_offset * elem_size,
                  static_cast<size_t>(r.length * elem_size));
      continue;
    }
    for (int64_t i = 0; i < r.length; ++i) {
      uint32_t bits;
      std::memcpy(&bits, src + (r.src_offset + i) * 4, 4);
      const uint16_t b = F32BitsToBf16Bits(bits);
      std::memcpy(dst + (r.dst_offset + i) * 2, &b, 2);
    }
  }
}

// Runs reading anywhere in [0, src_elements) and writing disjoint ranges of
// the destination, tiny to long; *dst_elements gets the extent written.
std::vector<CopyRun> RandomRuns(std::mt19937& rng, int64_t src_elements,
                                bool contiguous, int64_t* dst_elements) {
  std::vector<CopyRun> runs;
  int64_t at = 0;
  for (int i = 0; i < 600; ++i) {
    const uint32_t kind = rng() % 10;
    int64_t len = kind < 6   ? 1 + rng() % 40
                  : kind < 9 ? 41 + rng() % 5000
                             : 5001 + rng() % 100000;
    len = std::min(len, src_elements);
    CopyRun r;
    r.src_offset = static_cast<int64_t>(rng() % (src_elements - len + 1));
    if (!contiguous) at += rng() % 4;
    r.dst_offset = at;
    r.length = len;
    at += len;
    runs.push_back(r);
  }
  if (!contiguous) std::shuffle(runs.begin(), runs.end(), rng);
  *dst_elements = at;
  return runs;
}

// Copies `runs` on the GPU with the buffers shifted by the given byte
// offsets from their allocation and compares every destination byte with
// the host loop.
void CheckRuns(const Bytes& src_host, const std::vector<CopyRun>& runs,
               int64_t dst_elements, int elem_size, bool cast, size_t src_shift,
               size_t dst_shift) {
  const int dst_size = cast ? 2 : elem_size;
  const size_t dst_bytes = static_cast<size_t>(dst_elements) * dst_size;
  auto src = DeviceBuffer::Allocate(0, src_host.size() + src_shift);
  auto dst = DeviceBuffer::Allocate(0, dst_bytes + dst_shift);
  ASSERT_TRUE(src.ok() && dst.ok());
  ASSERT_TRUE(src->CopyFromHost(src_host, src_shift).ok());
  ASSERT_TRUE(dst->Fill(0xA5).ok());
  const Status s = GpuCopyRuns(src->data() + src_shift, dst->data() + dst_shift,
                               runs, elem_size, cast);
  ASSERT_TRUE(s.ok()) << s;
  Bytes got(dst_bytes);
  ASSERT_TRUE(dst->CopyToHost(dst_shift, got).ok());
  Bytes want(dst_bytes, 0xA5);
  HostCopyRuns(src_host.data(), want.data(), runs, elem_size, cast);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i], want[i])
        << "byte " << i << " elem " << elem_size << " cast " << cast
        << " shifts " << src_shift << "/" << dst_shift;
  }
}

TEST(PackKernelTest, RandomRunsMatchHost) {
  HY_SKIP_WITHOUT_GPU();
  std::mt19937 rng(17);
  const int64_t src_elements = 300000;
  struct Shape {
    int elem_size;
    bool cast;
  };
  for (const Shape shape : {Shape{1, false}, Shape{2, false}, Shape{4, false},
                            Shape{8, false}, Shape{4, true}}) {
    Bytes src(static_cast<size_t>(src_elements) * shape.elem_size);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    for (bool contiguous : {true, false}) {  // Pack, then scatter.
      int64_t dst_elements = 0;
      const auto runs =
          RandomRuns(rng, src_elements, contiguous, &dst_elements);
      for (size_t src_shift : {0, 1, 4, 6}) {
        for (size_t dst_shift : {0, 2, 3, 8}) {
          CheckRuns(src, runs, dst_elements, shape.elem_size, shape.cast,
                    src_shift, dst_shift);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(PackKernelTest, CastIsBitIdenticalToHostOnEdges) {
  HY_SKIP_WITHOUT_GPU();
  std::vector<uint32_t> values;
  // Every sign / exponent / top-mantissa pattern with the low halves that
  // decide rounding: exact, just above, ties (even and odd), just below.
  for (uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      values.push_back(hi << 16 | lo);
    }
  }
  for (uint32_t v : {0x7FC00000u, 0x7F800001u, 0x7FBFFFFFu, 0xFF800001u,
                     0xFFFFFFFFu, 0x7F800000u, 0xFF800000u, 0x7F7FFFFFu,
                     0x7F7F8000u, 0xFF7FFFFFu, 0x00000001u, 0x807FFFFFu,
                     0x00008000u, 0x00018000u, 0x80000000u, 0x00000000u}) {
    values.push_back(v);
  }
  Bytes src(values.size() * 4);
  std::memcpy(src.data(), values.data(), src.size());
  const int64_t n = static_cast<int64_t>(values.size());
  // One run over everything, then runs that start at every alignment. The
  // gaps between destinations only grow, so no two runs write the same
  // element (the kernel runs them in no order).
  std::vector<std::vector<CopyRun>> layouts = {{CopyRun{0, 0, n}}};
  std::vector<CopyRun> shifted;
  for (int64_t at = 0, gap = 0, k = 0; at < n; ++k) {
    const int64_t len = std::min<int64_t>(n - at, 1 + (k * 37) % 3000);
    gap += k % 5;
    shifted.push_back(CopyRun{at, at + gap, len});
    at += len;
  }
  layouts.push_back(shifted);
  for (const auto& runs : layouts) {
    const int64_t dst_elements = runs.back().dst_offset + runs.back().length;
    for (size_t src_shift : {0, 4, 8, 1}) {
      for (size_t dst_shift : {0, 2, 6, 1}) {
        CheckRuns(src, runs, dst_elements, 4, true, src_shift, dst_shift);
        if (HasFatalFailure()) return;
      }
    }
  }
  // And the host cast agrees with the scalar definition.
  Bytes host(values.size() * 2);
  CastF32ToBf16(src.data(), host.data(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t b;
    std::memcpy(&b, host.data() + 2 * i, 2);
    ASSERT_EQ(b, F32BitsToBf16Bits(values[i]));
  }
}

TEST(PackKernelTest, RejectsBadArguments) {
  const int x = 0;
  int y = 0;
  EXPECT_TRUE(GpuCopyRuns(&x, &y, {}, 0, false).IsInvalidArgument());
  EXPECT_TRUE(GpuCopyRuns(&x, &y, {}, 2, true).IsInvalidArgument());
  EXPECT_TRUE(
      GpuCopyRuns(&x, &y, {CopyRun{-1, 0, 1}}, 4, false).IsInvalidArgument());
}

}  // namespace
}  // namespace hy::reshard::nccl_internal
