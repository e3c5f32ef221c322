#include "sparse_delta.h"

#include <algorithm>
#include <cstring>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "hy/common/bf16.h"
#include "hy/common/hash.h"

namespace hy::reshard::internal {
namespace {

// Elements cast and compared per block: the block stays in L1.
constexpr size_t kBlock = 2048;

size_t WireSize(const ModelSpec& spec, WireFormat wire, const Transfer& t) {
  return DTypeSize(WireDType(spec.tensors[t.tensor].meta.dtype, wire));
}

uint64_t GetU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Maps element indices within a bucket to the transfer holding them.
class Locator {
 public:
  explicit Locator(const PeerList& list) {
    starts_.push_back(0);
    for (const Transfer& t : list.transfers) {
      starts_.push_back(starts_.back() + static_cast<uint64_t>(t.length));
    }
  }
  uint64_t total() const { return starts_.back(); }
  // The transfer holding element i (-1 when beyond the bucket) and, in
  // *offset, i's position within it. Indices come mostly in order, so the
  // last transfer found is tried first.
  int Find(uint64_t i, int64_t* offset) {
    if (i < starts_[cur_] || i >= starts_[cur_ + 1]) {
      if (i >= total()) return -1;
      cur_ = static_cast<size_t>(
          std::upper_bound(starts_.begin(), starts_.end(), i) -
          starts_.begin() - 1);
    }
    *offset = static_cast<int64_t>(i - starts_[cur_]);
    return static_cast<int>(cur_);
  }

 private:
  std::vector<uint64_t> starts_;
  size_t cur_ = 0;
};

// Records change j of a block (bucket index base + j, value at now).
// REQUIRES: room for it (Reserve).
inline void Record(SparseScratch* s, uint64_t base, size_t j,
                   const uint8_t* now, size_t es) {
  s->index[s->count] = static_cast<uint32_t>(base + j);
  std::memcpy(s->values.data() + s->count * es, now + j * es, es);
  ++s->count;
}

// Empties *s with room for `most` changes and one block more.
void Reserve(SparseScratch* s, size_t most, size_t es) {
  s->count = 0;
  if (s->index.size() < most + kBlock) {
    s->index.resize(most + kBlock);
    s->values.resize((most + kBlock) * es);
  }
}

// Records the elements of `now` that differ from `old` (m elements of es
// bytes, the first at bucket index `base`).
void Compare(const uint8_t* now, const uint8_t* old, size_t m, size_t es,
             uint64_t base, SparseScratch* s) {
  size_t j = 0;
  if (es == 1 || es == 2 || es == 4 || es == 8) {
    const size_t per_word = 8 / es;
    const size_t words = m / per_word;
    const unsigned lane_bits = static_cast<unsigned>(8 * es);
    ForEachChangedWord(now, old, words, [&](size_t w, uint64_t d) {
      for (uint64_t mask = NonzeroLaneBits(d, es); mask != 0;
           mask &= mask - 1) {
        Record(s, base,
               w * per_word +
                   static_cast<size_t>(__builtin_ctzll(mask)) / lane_bits,
               now, es);
      }
    });
    j = words * per_word;
  }
  for (; j < m; ++j) {
    if (std::memcmp(now + j * es, old + j * es, es) != 0) {
      Record(s, base, j, now, es);
    }
  }
}

#if defined(__SSE2__)
// F32BitsToBf16Bits of four lanes, sign-extended to 32 bits (so that
// _mm_packs_epi32 keeps their 16 bits exactly).
inline __m128i NarrowLanes(__m128i x) {
  const __m128i lsb = _mm_and_si128(_mm_srli_epi32(x, 16), _mm_set1_epi32(1));
  const __m128i rounded = _mm_srai_epi32(
      _mm_add_epi32(_mm_add_epi32(x, _mm_set1_epi32(0x7FFF)), lsb), 16);
  const __m128i nan = _mm_cmpgt_epi32(
      _mm_and_si128(x, _mm_set1_epi32(0x7FFFFFFF)), _mm_set1_epi32(0x7F800000));
  const __m128i quiet =
      _mm_or_si128(_mm_srai_epi32(x, 16), _mm_set1_epi32(0x40));
  return _mm_or_si128(_mm_and_si128(nan, quiet),
                      _mm_andnot_si128(nan, rounded));
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#define HY_SPARSE_AVX2 1
// NarrowLanes on eight lanes.
__attribute__((target("avx2"))) inline __m256i NarrowLanes8(__m256i x) {
  const __m256i lsb =
      _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srai_epi32(
      _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb),
      16);
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)),
                         _mm256_set1_epi32(0x7F800000));
  const __m256i quiet =
      _mm256_or_si256(_mm256_srai_epi32(x, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

// NarrowCompare sixteen at a time, where the CPU has AVX2. Returns how
// many elements it did (a multiple of 16).
__attribute__((target("avx2"))) size_t NarrowCompareAvx2(const uint8_t* in,
                                                         const uint8_t* old,
                                                         size_t m, uint8_t* out,
                                                         uint64_t base,
                                                         SparseScratch* s) {
  size_t j = 0;
  for (; j + 16 <= m; j += 16) {
    const __m256i lo = NarrowLanes8(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + j * 4)));
    const __m256i hi = NarrowLanes8(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + j * 4 + 32)));
    // packs works within 128-bit halves: put the quarters back in order.
    const __m256i now =
        _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j * 2), now);
    const __m256i was =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(old + j * 2));
    const uint32_t same = static_cast<uint32_t>(
        _mm256_movemask_epi8(_mm256_cmpeq_epi16(now, was)));
    // Two mask bits per lane; the even ones name the changed lanes.
    for (uint32_t d = ~same & 0x55555555u; d != 0; d &= d - 1) {
      Record(s, base, j + static_cast<size_t>(__builtin_ctz(d)) / 2, out, 2);
    }
  }
  return j;
}

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

// One pass for f32 sources sent as bf16: casts m elements at `in` into
// `out` (a block in L1, hashed by the caller) and records those that
// differ from `old`, eight at a time.
void NarrowCompare(const uint8_t* in, const uint8_t* old, size_t m,
                   uint8_t* out, uint64_t base, SparseScratch* s) {
  size_t j = 0;
#if defined(HY_SPARSE_AVX2)
  if (HasAvx2()) j = NarrowCompareAvx2(in, old, m, out, base, s);
#endif
#if defined(__SSE2__)
  for (; j + 8 <= m; j += 8) {
    const __m128i lo = NarrowLanes(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + j * 4)));
    const __m128i hi = NarrowLanes(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + j * 4 + 16)));
    const __m128i now = _mm_packs_epi32(lo, hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j * 2), now);
    const __m128i was =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(old + j * 2));
    const unsigned same =
        static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi16(now, was)));
    if (same != 0xFFFFu) {
      // Branch-free: every lane is written, and the count advances past
      // the changed ones only (their number and place are random).
      uint32_t* idx = s->index.data();
      uint8_t* val = s->values.data();
      size_t n = s->count;
      for (unsigned k = 0; k < 8; ++k) {
        idx[n] = static_cast<uint32_t>(base + j + k);
        std::memcpy(val + n * 2, out + (j + k) * 2, 2);
        n += ((same >> (2 * k)) & 1u) ^ 1u;
      }
      s->count = n;
    }
  }
#endif
  if (j < m) {
    CastF32ToBf16(in + j * 4, out + j * 2, m - j);
    Compare(out + j * 2, old + j * 2, m - j, 2, base + j, s);
  }
}

// Finds the changes of m elements of transfer t from element i (bucket
// index base + i), hashing the new wire bytes when `hasher` is set.
void Scan(const ModelSpec& spec, WireFormat wire, const Transfer& t, int64_t i,
          size_t m, size_t es, uint64_t base,
          const std::vector<ConstBytes>& src,
          const std::vector<ConstBytes>& last, Hasher64* hasher,
          SparseScratch* s) {
  const DType sd = spec.tensors[t.tensor].meta.dtype;
  const size_t ses = DTypeSize(sd);
  const uint8_t* now = src[t.tensor].data() + (t.src_offset + i) * ses;
  const uint8_t* old = last[t.tensor].data() + (t.src_offset + i) * es;
  if (WireDType(sd, wire) != sd) {  // f32 -> bf16.
    alignas(64) uint8_t cast[kBlock * 2];
    NarrowCompare(now, old, m, cast, base + i, s);
    if (hasher != nullptr) hasher->Update(ConstBytes(cast, m * 2));
  } else {
    Compare(now, old, m, es, base + i, s);
    if (hasher != nullptr) hasher->Update(ConstBytes(now, m * es));
  }
}

// The changed fraction of the bucket, estimated from kSamples windows of
// kWindow elements spread evenly over it.
double SampleDensity(const ModelSpec& spec, WireFormat wire,
                     const PeerList& list, const std::vector<ConstBytes>& src,
                     const std::vector<ConstBytes>& last, SparseScratch* s) {
  constexpr uint64_t kSamples = 32, kWindow = 128;
  Locator where(list);
  const uint64_t total = where.total();
  uint64_t seen = 0;
  Reserve(s, kSamples * kWindow, list.element_size);
  for (uint64_t k = 0; k < kSamples; ++k) {
    int64_t off = 0;
    const int ti = where.Find(total / kSamples * k, &off);
    if (ti < 0) break;
    const Transfer& t = list.transfers[ti];
    const size_t m =
        static_cast<size_t>(std::min<int64_t>(kWindow, t.length - off));
    Scan(spec, wire, t, off, m, list.element_size, 0, src, last, nullptr, s);
    seen += m;
  }
  return seen == 0 ? 0.0 : static_cast<double>(s->count) / seen;
}

}  // namespace

bool SparseEligible(const ModelSpec& spec, WireFormat wire,
                    const PeerList& list) {
  uint64_t count = 0;
  for (const Transfer& t : list.transfers) {
    if (WireSize(spec, wire, t) != list.element_size) return false;
    count += static_cast<uint64_t>(t.length);
  }
  return count < (uint64_t{1} << 32);  // u32 indices.
}

SparseOutcome EncodeSparse(const ModelSpec& spec, WireFormat wire,
                           const PeerList& list,
                           const std::vector<ConstBytes>& src,
                           const std::vector<ConstBytes>& last,
                           SparseScratch* scratch, WireBuffer* bucket,
                           int64_t* changed) {
  if (!SparseEligible(spec, wire, list)) return SparseOutcome::kUnsupported;
  const size_t es = list.element_size;
  const uint64_t total = static_cast<uint64_t>(list.wire_bytes) / es;
  const size_t n_bytes = static_cast<size_t>(list.wire_bytes);
  // Pairs beat the full form only below this many changes.
  const size_t cap =
      std::max<size_t>(1, n_bytes > 16 ? (n_bytes - 16) / (4 + es) : 0);
  // A bucket well past the break-even on a sample goes whole at once.
  if (total >= 65536) {
    const double density = SampleDensity(spec, wire, list, src, last, scratch);
    if (density * static_cast<double>(total) >
        1.25 * static_cast<double>(cap)) {
      *changed += static_cast<int64_t>(density * static_cast<double>(total));
      return SparseOutcome::kTooDense;
    }
  }
  Reserve(scratch, cap, es);
  Hasher64 hasher;
  uint64_t base = 0;
  for (const Transfer& t : list.transfers) {
    for (int64_t i = 0; i < t.length; i += kBlock) {
      const size_t m =
          static_cast<size_t>(std::min<int64_t>(kBlock, t.length - i));
      Scan(spec, wire, t, i, m, es, base, src, last, &hasher, scratch);
      const uint64_t seen = base + i + m;
      const uint64_t found = scratch->count;
      // Past the break-even, or after an eighth of the bucket on course
      // for well past it: the full form wins.
      if (found >= cap || (seen >= total / 8 && seen >= 65536 &&
                           4 * found * total > 5 * cap * seen)) {
        *changed += static_cast<int64_t>(found);
        return SparseOutcome::kTooDense;
      }
    }
    base += static_cast<uint64_t>(t.length);
  }
  const uint64_t checksum = hasher.Digest();
  const size_t found = scratch->count;
  *changed += static_cast<int64_t>(found);
  if (found == 0) {
    bucket->resize(1 + 8);
    (*bucket)[0] = static_cast<uint8_t>(BucketKind::kUnchanged);
    std::memcpy(bucket->data() + 1, &checksum, 8);
    return SparseOutcome::kEncoded;
  }
  bucket->resize(1 + 16 + found * (4 + es));
  uint8_t* out = bucket->data();
  out[0] = static_cast<uint8_t>(BucketKind::kPairs);
  const uint64_t count = found;
  std::memcpy(out + 1, &checksum, 8);
  std::memcpy(out + 9, &count, 8);
  std::memcpy(out + 17, scratch->index.data(), found * 4);
  std::memcpy(out + 17 + found * 4, scratch->values.data(), found * es);
  return SparseOutcome::kEncoded;
}

void ApplySentPairs(const PeerList& list, ConstBytes bucket,
                    const std::vector<MutableBytes>& last) {
  if (bucket.size() < 17 ||
      bucket.data()[0] != static_cast<uint8_t>(BucketKind::kPairs)) {
    return;
  }
  const size_t es = list.element_size;
  const uint64_t count = GetU64(bucket.data() + 9);
  const uint8_t* idx = bucket.data() + 17;
  const uint8_t* val = idx + count * 4;
  Locator where(list);
  for (uint64_t k = 0; k < count; ++k) {
    uint32_t i;
    std::memcpy(&i, idx + k * 4, 4);
    int64_t off = 0;
    const int ti = where.Find(i, &off);
    if (ti < 0) continue;  // Not from EncodeSparse; cannot happen.
    const Transfer& t = list.transfers[ti];
    std::memcpy(last[t.tensor].data() + (t.src_offset + off) * es, val + k * es,
                es);
  }
}

Status ApplySparse(const PeerList& list, ConstBytes bucket,
                   const std::vector<MutableBytes>& dst) {
  auto loss = [](const std::string& why) {
    return Status::DataLoss("reshard bucket: " + why);
  };
  const size_t es = list.element_size;
  if (bucket.size() < 9) return loss("truncated delta bucket");
  const auto kind = static_cast<BucketKind>(bucket.data()[0]);
  const uint64_t checksum = GetU64(bucket.data() + 1);
  Locator where(list);
  if (kind == BucketKind::kPairs) {
    if (bucket.size() < 17) return loss("truncated pairs bucket");
    const uint64_t count = GetU64(bucket.data() + 9);
    if (count > where.total() || bucket.size() != 17 + count * (4 + es)) {
      return loss("pairs bucket of the wrong length");
    }
    const uint8_t* idx = bucket.data() + 17;
    const uint8_t* val = idx + count * 4;
    for (uint64_t k = 0; k < count; ++k) {
      uint32_t i;
      std::memcpy(&i, idx + k * 4, 4);
      int64_t off = 0;
      const int ti = where.Find(i, &off);
      if (ti < 0) return loss("pair index out of range");
      const Transfer& t = list.transfers[ti];
      std::memcpy(dst[t.tensor].data() + (t.dst_offset + off) * es,
                  val + k * es, es);
    }
  } else if (kind != BucketKind::kUnchanged || bucket.size() != 9) {
    return loss("not a sparse bucket");
  }
  Hasher64 hasher;
  for (const Transfer& t : list.transfers) {
    hasher.Update(ConstBytes(dst[t.tensor].data() + t.dst_offset * es,
                             static_cast<size_t>(t.length) * es));
  }
  if (hasher.Digest() != checksum) {
    return loss(
        "checksum mismatch after applying the delta: the receiver's previous "
        "copy is not what the sender last sent");
  }
  return Status::OK();
}

}  // namespace hy::reshard::internal
