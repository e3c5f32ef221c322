#include "sparse_delta.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "hy/common/bf16.h"
#include "hy/common/bf16_lanes.h"
#include "hy/common/hash.h"
#include "pairs.h"

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

// One element of es bytes (the common sizes as fixed-size copies).
inline void PutElement(uint8_t* to, const uint8_t* from, size_t es) {
  switch (es) {
    case 2:
      std::memcpy(to, from, 2);
      break;
    case 4:
      std::memcpy(to, from, 4);
      break;
    default:
      std::memcpy(to, from, es);
  }
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

// Empties *s with room for `most` changes, one block more and the eight
// slots a branch-free record writes past the last change.
void Reserve(SparseScratch* s, size_t most, size_t es) {
  s->count = 0;
  if (s->index.size() < most + kBlock + 8) {
    s->index.resize(most + kBlock + 8);
    s->values.resize((most + kBlock + 8) * es);
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

#if defined(HY_BF16_LANES_X86)
// Left-packing the changed lanes of eight 16-bit lanes, for each mask m of
// changed lanes: the byte shuffle that moves their values to the front,
// their lane numbers, and how many there are.
struct PackTables {
  alignas(16) uint8_t shuffle[256][16];
  alignas(8) uint8_t lanes[256][8];
  uint8_t count[256];
};

const PackTables& Tables() {
  static const PackTables tables = [] {
    PackTables t{};
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int lane = 0; lane < 8; ++lane) {
        if (((m >> lane) & 1) == 0) continue;
        t.shuffle[m][2 * k] = static_cast<uint8_t>(2 * lane);
        t.shuffle[m][2 * k + 1] = static_cast<uint8_t>(2 * lane + 1);
        t.lanes[m][k++] = static_cast<uint8_t>(lane);
      }
      for (int b = 2 * k; b < 16; ++b) t.shuffle[m][b] = 0x80;
      t.count[m] = static_cast<uint8_t>(k);
    }
    return t;
  }();
  return tables;
}

// Records the changed lanes (mask m) of eight new values `now` at bucket
// index `first`, branch-free: all eight slots are written, the count
// advances past the changed ones. REQUIRES: room for eight more.
__attribute__((target("avx2"))) inline void PackChanged(
    const PackTables& t, unsigned m, __m128i now, uint64_t first,
    uint32_t* index, uint8_t* values, size_t* n) {
  const __m128i moved = _mm_shuffle_epi8(
      now, _mm_load_si128(reinterpret_cast<const __m128i*>(t.shuffle[m])));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(values + *n * 2), moved);
  const __m256i lanes = _mm256_cvtepu8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(t.lanes[m])));
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(index + *n),
      _mm256_add_epi32(lanes, _mm256_set1_epi32(static_cast<int>(first))));
  *n += t.count[m];
}

// NarrowUpdate sixteen at a time, where the CPU has AVX2. Returns how many
// elements it did (a multiple of 16).
__attribute__((target("avx2"))) size_t NarrowUpdateAvx2(const uint8_t* in,
                                                        uint8_t* last, size_t m,
                                                        uint64_t base,
                                                        SparseScratch* s) {
  const PackTables& t = Tables();
  uint32_t* index = s->index.data();
  uint8_t* values = s->values.data();
  size_t n = s->count;
  size_t j = 0;
  for (; j + 16 <= m; j += 16) {
    const __m256i now = Narrow16(in + j * 4);
    __m256i* at = reinterpret_cast<__m256i*>(last + j * 2);
    const __m256i was = _mm256_loadu_si256(at);
    _mm256_storeu_si256(at, now);
    const __m256i same16 = _mm256_cmpeq_epi16(now, was);
    // One byte per lane (0xFF: same), then one bit.
    const unsigned changed =
        ~static_cast<unsigned>(_mm_movemask_epi8(
            _mm_packs_epi16(_mm256_castsi256_si128(same16),
                            _mm256_extracti128_si256(same16, 1)))) &
        0xFFFFu;
    PackChanged(t, changed & 0xFFu, _mm256_castsi256_si128(now), base + j,
                index, values, &n);
    PackChanged(t, changed >> 8, _mm256_extracti128_si256(now, 1), base + j + 8,
                index, values, &n);
  }
  s->count = n;
  return j;
}
#endif

// One pass for f32 sources sent as bf16: casts m elements at `in` over
// their previous bf16 values at `last` and records those that changed.
void NarrowUpdate(const uint8_t* in, uint8_t* last, size_t m, uint64_t base,
                  SparseScratch* s) {
  size_t j = 0;
#if defined(HY_BF16_LANES_X86)
  if (HasAvx2()) j = NarrowUpdateAvx2(in, last, m, base, s);
  for (; j + 8 <= m; j += 8) {
    const __m128i now = Narrow8(in + j * 4);
    __m128i* at = reinterpret_cast<__m128i*>(last + j * 2);
    const __m128i was = _mm_loadu_si128(at);
    _mm_storeu_si128(at, now);
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
        std::memcpy(val + n * 2, last + (j + k) * 2, 2);
        n += ((same >> (2 * k)) & 1u) ^ 1u;
      }
      s->count = n;
    }
  }
#endif
  if (j < m) {
    alignas(64) uint8_t now[16 * 2];
    for (size_t done = 0; j + done < m; done += 16) {
      const size_t n = std::min<size_t>(16, m - j - done);
      CastF32ToBf16(in + (j + done) * 4, now, n);
      Compare(now, last + (j + done) * 2, n, 2, base + j + done, s);
      std::memcpy(last + (j + done) * 2, now, n * 2);
    }
  }
}

// Brings m elements of transfer t from element i (bucket index base + i)
// up to date in `at` (their wire bytes as last sent). With `s`, records the
// changed ones and hashes the new bytes into *hasher; without (a bucket
// that goes whole), only casts or copies.
void Update(const ModelSpec& spec, WireFormat wire, const Transfer& t,
            int64_t i, size_t m, size_t es, uint64_t base,
            const std::vector<ConstBytes>& src, uint8_t* at, Hasher64* hasher,
            SparseScratch* s) {
  const DType sd = spec.tensors[t.tensor].meta.dtype;
  const size_t ses = DTypeSize(sd);
  const uint8_t* now = src[t.tensor].data() + (t.src_offset + i) * ses;
  if (WireDType(sd, wire) != sd) {  // f32 -> bf16.
    if (s != nullptr) {
      NarrowUpdate(now, at, m, base + i, s);
    } else {
      CastF32ToBf16(now, at, m);
    }
  } else {
    if (s != nullptr) Compare(now, at, m, es, base + i, s);
    std::memcpy(at, now, m * es);
  }
  if (s != nullptr) hasher->Update(ConstBytes(at, m * es));
}

// The changed fraction of the bucket, estimated from kSamples windows of
// kWindow elements spread evenly over it (`last` is not written; the
// changes seen are recorded in *s).
double SampleDensity(const ModelSpec& spec, WireFormat wire,
                     const PeerList& list, const std::vector<ConstBytes>& src,
                     const uint8_t* last, SparseScratch* s) {
  constexpr uint64_t kSamples = 32, kWindow = 128;
  const size_t es = list.element_size;
  Locator where(list);
  const uint64_t total = where.total();
  uint64_t seen = 0;
  Reserve(s, kSamples * kWindow, es);
  alignas(64) uint8_t now[kWindow * 8];
  for (uint64_t k = 0; k < kSamples; ++k) {
    const uint64_t first = total / kSamples * k;
    int64_t off = 0;
    const int ti = where.Find(first, &off);
    if (ti < 0) break;
    const Transfer& t = list.transfers[ti];
    const size_t m =
        static_cast<size_t>(std::min<int64_t>(kWindow, t.length - off));
    const DType sd = spec.tensors[t.tensor].meta.dtype;
    const uint8_t* in =
        src[t.tensor].data() + (t.src_offset + off) * DTypeSize(sd);
    if (WireDType(sd, wire) != sd) {
      CastF32ToBf16(in, now, m);
      in = now;
    }
    Compare(in, last + first * es, m, es, first, s);
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
                           MutableBytes last, SparseScratch* scratch,
                           WireBuffer* bucket, int64_t* changed) {
  if (!SparseEligible(spec, wire, list) ||
      last.size() != static_cast<size_t>(list.wire_bytes)) {
    return SparseOutcome::kUnsupported;
  }
  const size_t es = list.element_size;
  const uint64_t total = static_cast<uint64_t>(list.wire_bytes) / es;
  const size_t n_bytes = static_cast<size_t>(list.wire_bytes);
  // Pairs go only below this many changes (a third of a bf16 bucket's
  // elements): past it, recording and scattering them costs more time than
  // the bytes they save on a link as fast as loopback, although with
  // one-byte gaps they stay smaller to about two thirds.
  const size_t cap =
      std::max<size_t>(1, n_bytes > 16 ? (n_bytes - 16) / (4 + es) : 0);
  // Recording stops once the full form has won: past the break-even, or
  // (for a bucket well past it on a sample, or after an eighth of the
  // bucket on course for well past it) early.
  bool dense = false;
  if (total >= 65536) {
    const double density =
        SampleDensity(spec, wire, list, src, last.data(), scratch);
    if (density * static_cast<double>(total) >
        1.25 * static_cast<double>(cap)) {
      *changed += static_cast<int64_t>(density * static_cast<double>(total));
      dense = true;
    }
  }
  Reserve(scratch, cap, es);
  Hasher64 hasher;
  uint64_t base = 0;
  for (const Transfer& t : list.transfers) {
    for (int64_t i = 0; i < t.length; i += kBlock) {
      const size_t m =
          static_cast<size_t>(std::min<int64_t>(kBlock, t.length - i));
      Update(spec, wire, t, i, m, es, base, src, last.data() + (base + i) * es,
             &hasher, dense ? nullptr : scratch);
      if (dense) continue;
      const uint64_t seen = base + i + m;
      const uint64_t found = scratch->count;
      if (found >= cap || (seen >= total / 8 && seen >= 65536 &&
                           4 * found * total > 5 * cap * seen)) {
        *changed += static_cast<int64_t>(found);
        dense = true;
      }
    }
    base += static_cast<uint64_t>(t.length);
  }
  if (dense) return SparseOutcome::kTooDense;
  const uint64_t checksum = hasher.Digest();
  const size_t found = scratch->count;
  *changed += static_cast<int64_t>(found);
  if (found == 0) {
    bucket->resize(1 + 8);
    (*bucket)[0] = static_cast<uint8_t>(BucketKind::kUnchanged);
    std::memcpy(bucket->data() + 1, &checksum, 8);
    return SparseOutcome::kEncoded;
  }
  uint8_t* values =
      StartPairs(checksum, scratch->index.data(), found, es, bucket);
  // Below cap the pairs are smaller than the full form even with every gap
  // that can be escaped escaped; this only guards that.
  if (bucket->size() > n_bytes) {
    bucket->clear();
    return SparseOutcome::kTooDense;
  }
  std::memcpy(values, scratch->values.data(), found * es);
  return SparseOutcome::kEncoded;
}

Status ApplySparse(const PeerList& list, ConstBytes bucket,
                   const std::vector<MutableBytes>& dst) {
  auto loss = [](const std::string& why) {
    return Status::DataLoss("reshard bucket: " + why);
  };
  const size_t es = list.element_size;
  if (bucket.size() < 9) return loss("truncated delta bucket");
  uint64_t total = 0;
  for (const Transfer& t : list.transfers) {
    total += static_cast<uint64_t>(t.length);
  }
  PairsView pairs;
  const auto kind = static_cast<BucketKind>(bucket.data()[0]);
  if (kind == BucketKind::kPairs) {
    HY_RETURN_IF_ERROR(ParsePairs(bucket, es, total, &pairs));
  } else if (kind == BucketKind::kUnchanged && bucket.size() == 9) {
    pairs.checksum = GetU64(bucket.data() + 1);
  } else {
    return loss("not a sparse bucket");
  }
  // next: the position of change k (none left: past every element).
  uint64_t k = 0, next = ~uint64_t{0};
  auto advance = [&] {
    if (k == pairs.count) {
      next = ~uint64_t{0};
      return true;
    }
    return pairs.gaps.Next(&next);
  };
  if (!advance()) return loss("malformed pair positions");
  // Block by block: the block's changes go in, then the block is hashed
  // while it is still in cache (one pass over the destination, not two).
  Hasher64 hasher;
  uint64_t base = 0;  // The bucket index of the transfer's first element.
  for (const Transfer& t : list.transfers) {
    uint8_t* out = dst[t.tensor].data() + t.dst_offset * es;
    const uint64_t length = static_cast<uint64_t>(t.length);
    for (uint64_t i = 0; i < length; i += kBlock) {
      const uint64_t m = std::min<uint64_t>(kBlock, length - i);
      while (next < base + i + m) {
        PutElement(out + (next - base) * es, pairs.values + k * es, es);
        ++k;
        if (!advance()) return loss("malformed pair positions");
      }
      hasher.Update(ConstBytes(out + i * es, m * es));
    }
    base += length;
  }
  if (k != pairs.count) return loss("pair index out of range");
  if (!pairs.gaps.AtEnd()) return loss("bytes past the last pair");
  if (hasher.Digest() != pairs.checksum) {
    return loss(
        "checksum mismatch after applying the delta: the receiver's previous "
        "copy is not what the sender last sent");
  }
  return Status::OK();
}

}  // namespace hy::reshard::internal
