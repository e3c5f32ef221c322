#include <algorithm>
#include <cstring>

#include "executor_internal.h"
#include "hy/common/bf16.h"
#include "plan_internal.h"

namespace hy::reshard {

const char* WireFormatName(WireFormat wire) {
  return wire == WireFormat::kBf16 ? "bf16" : "raw";
}

DType WireDType(DType src, WireFormat wire) {
  return (wire == WireFormat::kBf16 && src == DType::kF32) ? DType::kBF16 : src;
}

namespace internal {
namespace {

// Copies n elements of `dtype` from `in` to `out`, cast to the wire dtype.
inline void CastCopy(DType dtype, WireFormat wire, const uint8_t* in,
                     uint8_t* out, int64_t n) {
  if (wire == WireFormat::kBf16 && dtype == DType::kF32) {
    CastF32ToBf16(in, out, static_cast<size_t>(n));
  } else {
    std::memcpy(out, in, static_cast<size_t>(n) * DTypeSize(dtype));
  }
}

}  // namespace

void Describe(const ModelSpec& spec, WireFormat wire, PeerList* list) {
  list->wire_bytes = 0;
  bool first = true;
  bool mixed = false;
  for (const Transfer& t : list->transfers) {
    DType d = WireDType(spec.tensors[t.tensor].meta.dtype, wire);
    list->wire_bytes += t.length * static_cast<int64_t>(DTypeSize(d));
    if (first) {
      list->dtype = d;
      first = false;
    } else if (d != list->dtype) {
      mixed = true;
    }
  }
  if (mixed || first) list->dtype = DType::kU8;
  list->element_size = DTypeSize(list->dtype);
}

bool SameSource(const PeerList& a, const PeerList& b) {
  return !a.transfers.empty() &&
         std::equal(a.transfers.begin(), a.transfers.end(),
                    b.transfers.begin(), b.transfers.end(), SameSourceRun);
}

void GatherSource(const ModelSpec& spec, WireFormat wire, const PeerList& list,
                  const std::vector<ConstBytes>& src, uint8_t* out) {
  for (const Transfer& t : list.transfers) {
    DType dtype = spec.tensors[t.tensor].meta.dtype;
    size_t es = DTypeSize(dtype);
    CastCopy(dtype, wire, src[t.tensor].data() + t.src_offset * es, out,
             t.length);
    out += t.length * DTypeSize(WireDType(dtype, wire));
  }
}

void GatherWire(const ModelSpec& spec, WireFormat wire, const PeerList& list,
                const std::vector<ConstBytes>& bufs, bool use_dst_offset,
                uint8_t* out) {
  for (const Transfer& t : list.transfers) {
    size_t es = DTypeSize(WireDType(spec.tensors[t.tensor].meta.dtype, wire));
    int64_t at = use_dst_offset ? t.dst_offset : t.src_offset;
    std::memcpy(out, bufs[t.tensor].data() + at * es, t.length * es);
    out += t.length * es;
  }
}

void Scatter(const ModelSpec& spec, WireFormat wire, const PeerList& list,
             const uint8_t* in, const std::vector<MutableBytes>& dst) {
  for (const Transfer& t : list.transfers) {
    size_t es = DTypeSize(WireDType(spec.tensors[t.tensor].meta.dtype, wire));
    std::memcpy(dst[t.tensor].data() + t.dst_offset * es, in, t.length * es);
    in += t.length * es;
  }
}

void CopyLocal(const ModelSpec& spec, WireFormat wire, const Transfer& t,
               const std::vector<ConstBytes>& src,
               const std::vector<MutableBytes>& dst) {
  DType dtype = spec.tensors[t.tensor].meta.dtype;
  size_t es = DTypeSize(dtype);
  size_t wes = DTypeSize(WireDType(dtype, wire));
  CastCopy(dtype, wire, src[t.tensor].data() + t.src_offset * es,
           dst[t.tensor].data() + t.dst_offset * wes, t.length);
}

}  // namespace internal
}  // namespace hy::reshard
