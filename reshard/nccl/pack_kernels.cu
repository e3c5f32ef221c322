// The copy-op kernel (see copy_ops.h): one warp per op, copies vectorised
// to 16 bytes per lane where the addresses allow, and the f32 -> bf16 cast
// bit-identical to hy::F32BitsToBf16Bits.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "copy_ops.h"

namespace hy::reshard::nccl_internal {

namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
// Blocks per launch at most; more ops take more launches.
constexpr int64_t kMaxBlocks = int64_t{1} << 30;

// hy::F32BitsToBf16Bits (bf16.h) on the device: the same expression.
__device__ __forceinline__ uint32_t Bf16Bits(uint32_t bits) {
  const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  return (bits & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded;
}

// Copies n bytes with loads and stores of V once src is aligned to V; the
// caller guarantees src and dst are congruent modulo sizeof(V).
template <typename V>
__device__ __forceinline__ void CopyVec(const uint8_t* src, uint8_t* dst,
                                        int64_t n, int lane) {
  constexpr int64_t kW = sizeof(V);
  int64_t head = static_cast<int64_t>(
      (kW - (reinterpret_cast<uintptr_t>(src) & (kW - 1))) & (kW - 1));
  if (head > n) head = n;
  if (lane < head) dst[lane] = src[lane];
  src += head;
  dst += head;
  n -= head;
  const int64_t nv = n / kW;
  const V* __restrict__ vs = reinterpret_cast<const V*>(src);
  V* __restrict__ vd = reinterpret_cast<V*>(dst);
  int64_t i = lane;
  // Four independent loads in flight per lane before the stores.
  for (; i + 96 < nv; i += 128) {
    const V a = vs[i];
    const V b = vs[i + 32];
    const V c = vs[i + 64];
    const V d = vs[i + 96];
    vd[i] = a;
    vd[i + 32] = b;
    vd[i + 64] = c;
    vd[i + 96] = d;
  }
  for (; i < nv; i += 32) vd[i] = vs[i];
  const int64_t done = nv * kW;
  if (lane < n - done) dst[done + lane] = src[done + lane];
}

__device__ __forceinline__ void CopyBytes(const uint8_t* src, uint8_t* dst,
                                          int64_t n, int lane) {
  const uintptr_t diff =
      reinterpret_cast<uintptr_t>(src) ^ reinterpret_cast<uintptr_t>(dst);
  if ((diff & 15) == 0) {
    CopyVec<uint4>(src, dst, n, lane);
  } else if ((diff & 7) == 0) {
    CopyVec<uint2>(src, dst, n, lane);
  } else if ((diff & 3) == 0) {
    CopyVec<uint32_t>(src, dst, n, lane);
  } else if ((diff & 1) == 0) {
    CopyVec<uint16_t>(src, dst, n, lane);
  } else {
    CopyVec<uint8_t>(src, dst, n, lane);
  }
}

// n float32 at src to n bf16 at dst.
__device__ __forceinline__ void CastF32ToBf16(const uint8_t* src, uint8_t* dst,
                                              int64_t n, int lane) {
  const uintptr_t s = reinterpret_cast<uintptr_t>(src);
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst);
  if ((s & 3) != 0 || (d & 1) != 0) {
    // Unaligned buffers: assemble each value from bytes (little-endian).
    for (int64_t i = lane; i < n; i += 32) {
      const uint8_t* p = src + 4 * i;
      const uint32_t bits = uint32_t{p[0]} | uint32_t{p[1]} << 8 |
                            uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
      const uint32_t out = Bf16Bits(bits);
      dst[2 * i] = static_cast<uint8_t>(out);
      dst[2 * i + 1] = static_cast<uint8_t>(out >> 8);
    }
    return;
  }
  const uint32_t* __restrict__ in = reinterpret_cast<const uint32_t*>(src);
  uint16_t* __restrict__ out = reinterpret_cast<uint16_t*>(dst);
  // Elements before `in` is 16-byte aligned; vectorise if `out` is then
  // 8-byte aligned too.
  int64_t head = static_cast<int64_t>(((16 - (s & 15)) & 15) >> 2);
  if (head > n) head = n;
  if (((d + 2 * head) & 7) != 0) {
    for (int64_t i = lane; i < n; i += 32) {
      out[i] = static_cast<uint16_t>(Bf16Bits(in[i]));
    }
    return;
  }
  if (lane < head) out[lane] = static_cast<uint16_t>(Bf16Bits(in[lane]));
  in += head;
  out += head;
  n -= head;
  const int64_t nv = n / 4;
  const uint4* __restrict__ vin = reinterpret_cast<const uint4*>(in);
  uint2* __restrict__ vout = reinterpret_cast<uint2*>(out);
  int64_t i = lane;
  for (; i + 32 < nv; i += 64) {
    const uint4 a = vin[i];
    const uint4 b = vin[i + 32];
    vout[i] = make_uint2(Bf16Bits(a.x) | Bf16Bits(a.y) << 16,
                         Bf16Bits(a.z) | Bf16Bits(a.w) << 16);
    vout[i + 32] = make_uint2(Bf16Bits(b.x) | Bf16Bits(b.y) << 16,
                              Bf16Bits(b.z) | Bf16Bits(b.w) << 16);
  }
  for (; i < nv; i += 32) {
    const uint4 a = vin[i];
    vout[i] = make_uint2(Bf16Bits(a.x) | Bf16Bits(a.y) << 16,
                         Bf16Bits(a.z) | Bf16Bits(a.w) << 16);
  }
  for (int64_t j = nv * 4 + lane; j < n; j += 32) {
    out[j] = static_cast<uint16_t>(Bf16Bits(in[j]));
  }
}

__global__ void __launch_bounds__(kThreads)
    CopyOpsKernel(const CopyOp* __restrict__ ops, int64_t num_ops,
                  const uint8_t* const* __restrict__ src_bases,
                  uint8_t* const* __restrict__ dst_bases,
                  const uint8_t* src_bucket, uint8_t* dst_bucket) {
  const int64_t index =
      static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (index >= num_ops) return;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const CopyOp op = ops[index];
  const uint8_t* src =
      (op.src_slot == kBucketSlot ? src_bucket : src_bases[op.src_slot]) +
      op.src_offset;
  uint8_t* dst =
      (op.dst_slot == kBucketSlot ? dst_bucket : dst_bases[op.dst_slot]) +
      op.dst_offset;
  if (op.kind == CopyKind::kCastF32ToBf16) {
    CastF32ToBf16(src, dst, op.count, lane);
  } else {
    CopyBytes(src, dst, op.count, lane);
  }
}

Status CudaError(const char* what, cudaError_t e) {
  return Status::Internal(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

Status LaunchCopyOps(const CopyOp* ops, int64_t num_ops,
                     const uint8_t* const* src_bases, uint8_t* const* dst_bases,
                     const uint8_t* src_bucket, uint8_t* dst_bucket,
                     void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  for (int64_t first = 0; first < num_ops;) {
    const int64_t n = std::min(num_ops - first, kMaxBlocks * kWarpsPerBlock);
    const int64_t blocks = (n + kWarpsPerBlock - 1) / kWarpsPerBlock;
    CopyOpsKernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(
        ops + first, n, src_bases, dst_bases, src_bucket, dst_bucket);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return CudaError("copy kernel launch", e);
    first += n;
  }
  return Status::OK();
}

}  // namespace hy::reshard::nccl_internal
