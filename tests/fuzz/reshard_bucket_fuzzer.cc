// libFuzzer target for the reshard executor's bucket decoders: what a
// receiver does with bytes from a peer. The first input byte picks a mode:
//   0: the rest as a bucket for DecodeBucket (the gathered path), over a
//      previous copy of 1-, 2-, 4- or 8-byte elements, in place or not;
//   1: the rest as a bucket for ApplySparse, over transfers cut from the
//      input into one destination in a shuffled order;
//   2: the rest as values: a previous copy and a new one differing where
//      the input says, through EncodeDelta / DecodeBucket and through
//      EncodeSparse / ApplySparse; both must give the new copy exactly.
// Any crash, sanitizer report or __builtin_trap() is a finding.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "hy/common/bf16.h"
#include "sparse_delta.h"
#include "wire.h"

namespace {

using hy::ConstBytes;
using hy::DType;
using hy::MutableBytes;
using hy::reshard::ModelSpec;
using hy::reshard::TensorSpec;
using hy::reshard::Transfer;
using hy::reshard::WireFormat;
using hy::reshard::internal::PeerList;

constexpr size_t kSizes[] = {1, 2, 4, 8};

void HostileDecode(const uint8_t* data, size_t size) {
  if (size < 3) return;
  const size_t es = kSizes[data[0] % 4];
  const bool in_place = data[0] & 4;
  const size_t n = data[1] | static_cast<size_t>(data[2] & 0x0F) << 8;
  std::vector<uint8_t> before(n * es);
  for (size_t i = 0; i < before.size(); ++i) before[i] = uint8_t(i * 13);
  std::vector<uint8_t> now(before.size(), 0xEE);
  bool unchanged = false;
  MutableBytes out = in_place ? MutableBytes(before) : MutableBytes(now);
  (void)hy::reshard::internal::DecodeBucket(
      ConstBytes(data + 3, size - 3), DType::kU8, es, before, out, &unchanged);
}

void HostileApply(const uint8_t* data, size_t size) {
  if (size < 2) return;
  PeerList list;
  list.element_size = kSizes[data[0] % 4];
  // Up to 8 transfers of 0..63 elements, laid out in the destination in
  // reverse order (bucket order differs from destination order).
  const size_t count = (data[0] >> 2) % 8 + 1;
  if (size < 1 + count) return;
  int64_t total = 0;
  for (size_t k = 0; k < count; ++k) {
    Transfer t;
    t.length = data[1 + k] % 64;
    list.transfers.push_back(t);
    total += t.length;
  }
  int64_t at = total;
  for (Transfer& t : list.transfers) {
    at -= t.length;
    t.dst_offset = at;
  }
  list.wire_bytes = total * static_cast<int64_t>(list.element_size);
  std::vector<uint8_t> dst(static_cast<size_t>(list.wire_bytes), 0x33);
  std::vector<MutableBytes> view{MutableBytes(dst)};
  (void)hy::reshard::internal::ApplySparse(
      list, ConstBytes(data + 1 + count, size - 1 - count), view);
}

// Bits of f32 element i of `before`, then `after` where the input marks
// it (a bit per element; the rest of the input is new bits).
void RoundTrip(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const int64_t n = std::min<int64_t>(4096, 8 * static_cast<int64_t>(size));
  std::vector<uint32_t> before(n), after(n);
  for (int64_t i = 0; i < n; ++i) {
    before[i] = after[i] = 0x3F800000u + static_cast<uint32_t>(i) * 0x10001u;
    if ((data[(i / 8) % size] >> (i % 8)) & 1) {
      after[i] += 0x10000u + data[(i * 7) % size];
    }
  }
  // One f32 tensor; the bucket takes its second half, then its first.
  ModelSpec spec;
  TensorSpec t;
  t.meta.name = "w";
  t.meta.dtype = DType::kF32;
  t.meta.shape = {n};
  spec.tensors.push_back(t);
  PeerList list;
  list.transfers.push_back({0, 0, 1, n / 2, 0, n - n / 2});
  list.transfers.push_back({0, 0, 1, 0, n - n / 2, n / 2});
  hy::reshard::internal::Describe(spec, WireFormat::kBf16, &list);
  auto cast = [&](const std::vector<uint32_t>& f) {
    std::vector<uint8_t> out(static_cast<size_t>(n) * 2);
    std::vector<uint8_t> ordered(out.size());
    hy::CastF32ToBf16(reinterpret_cast<const uint8_t*>(f.data()), out.data(),
                      static_cast<size_t>(n));
    // Bucket order: the second half first.
    const size_t half = static_cast<size_t>(n / 2) * 2;
    std::memcpy(ordered.data(), out.data() + half, out.size() - half);
    std::memcpy(ordered.data() + out.size() - half, out.data(), half);
    return ordered;
  };
  const std::vector<uint8_t> old_bucket = cast(before);
  const std::vector<uint8_t> new_bucket = cast(after);

  // The gathered path.
  hy::reshard::internal::WireBuffer wire;
  int64_t changed = 0;
  if (!hy::reshard::internal::EncodeDelta(DType::kBF16, 2, old_bucket,
                                          new_bucket, &wire, &changed)
           .ok()) {
    __builtin_trap();
  }
  if (!wire.empty()) {
    std::vector<uint8_t> got(old_bucket.size());
    bool unchanged = false;
    if (!hy::reshard::internal::DecodeBucket(
             ConstBytes(wire.data(), wire.size()), DType::kBF16, 2, old_bucket,
             MutableBytes(got), &unchanged)
             .ok()) {
      __builtin_trap();
    }
    if ((unchanged ? old_bucket : got) != new_bucket) __builtin_trap();
  }

  // The sparse path: cast over the last-sent copy, apply into the
  // receiver's copy (held in bucket order here: dst_offset is bucket order).
  std::vector<uint8_t> last = old_bucket;
  std::vector<ConstBytes> src{ConstBytes(
      reinterpret_cast<const uint8_t*>(after.data()), after.size() * 4)};
  hy::reshard::internal::SparseScratch scratch;
  hy::reshard::internal::WireBuffer bucket;
  changed = 0;
  const auto outcome = hy::reshard::internal::EncodeSparse(
      spec, WireFormat::kBf16, list, src, MutableBytes(last), &scratch, &bucket,
      &changed);
  if (last != new_bucket) __builtin_trap();
  if (outcome == hy::reshard::internal::SparseOutcome::kEncoded) {
    std::vector<uint8_t> dst = old_bucket;
    std::vector<MutableBytes> view{MutableBytes(dst)};
    if (!hy::reshard::internal::ApplySparse(
             list, ConstBytes(bucket.data(), bucket.size()), view)
             .ok()) {
      __builtin_trap();
    }
    if (dst != new_bucket) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  switch (data[0] % 3) {
    case 0:
      HostileDecode(data + 1, size - 1);
      break;
    case 1:
      HostileApply(data + 1, size - 1);
      break;
    case 2:
      RoundTrip(data + 1, size - 1);
      break;
  }
  return 0;
}
