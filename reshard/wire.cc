#include "wire.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hy/common/hash.h"
#include "hy/statestore/codec.h"
#include "pairs.h"

namespace hy::reshard::internal {
namespace {

void PutU64(WireBuffer* out, size_t at, uint64_t v) {
  std::memcpy(out->data() + at, &v, sizeof(v));
}

uint64_t GetU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

bool Differs(const uint8_t* a, const uint8_t* b, size_t es) {
  switch (es) {
    case 2: {
      uint16_t x, y;
      std::memcpy(&x, a, 2);
      std::memcpy(&y, b, 2);
      return x != y;
    }
    case 4: {
      uint32_t x, y;
      std::memcpy(&x, a, 4);
      std::memcpy(&y, b, 4);
      return x != y;
    }
    default:
      return std::memcmp(a, b, es) != 0;
  }
}

// The number of elements of `es` bytes that differ between a and b
// (count elements), at memory speed; with `index`, also their positions.
int64_t FindChanges(const uint8_t* a, const uint8_t* b, size_t count, size_t es,
                    std::vector<uint32_t>* index) {
  int64_t changed = 0;
  size_t i = 0;
  if (es == 1 || es == 2 || es == 4 || es == 8) {
    const size_t per_word = 8 / es;
    const size_t words = count / per_word;
    if (index == nullptr) {
      ForEachChangedWord(a, b, words, [&](size_t, uint64_t d) {
        changed += __builtin_popcountll(NonzeroLaneBits(d, es));
      });
    } else {
      // Branch-free: every lane's position is written, and the write
      // position advances only past changed ones (changes are scattered,
      // so branches on them would mostly mispredict).
      uint32_t buf[1024 + 8];
      size_t n = 0;
      const int lane_bits = static_cast<int>(8 * es);
      for (size_t w = 0; w < words; ++w) {
        uint64_t x, y;
        std::memcpy(&x, a + w * 8, 8);
        std::memcpy(&y, b + w * 8, 8);
        const uint64_t m = NonzeroLaneBits(x ^ y, es);
        const uint32_t base = static_cast<uint32_t>(w * per_word);
        for (size_t k = 0; k < per_word; ++k) {
          buf[n] = base + static_cast<uint32_t>(k);
          n += (m >> (lane_bits * k + lane_bits - 1)) & 1;
        }
        if (n >= 1024) {
          index->insert(index->end(), buf, buf + n);
          changed += static_cast<int64_t>(n);
          n = 0;
        }
      }
      index->insert(index->end(), buf, buf + n);
      changed += static_cast<int64_t>(n);
    }
    i = words * per_word;
  }
  for (; i < count; ++i) {
    if (Differs(a + i * es, b + i * es, es)) {
      ++changed;
      if (index != nullptr) index->push_back(static_cast<uint32_t>(i));
    }
  }
  return changed;
}

}  // namespace

Status EncodeDelta(DType dtype, size_t es, ConstBytes before,
                   ConstBytes now_bytes, WireBuffer* out, int64_t* changed,
                   const DeltaCost& cost) {
  out->clear();
  const size_t n_bytes = now_bytes.size();
  if (before.size() != n_bytes || es == 0 || n_bytes % es != 0) {
    return Status::Internal("EncodeDelta: bucket and previous copy differ");
  }
  const uint8_t* now = now_bytes.data();
  const size_t count = n_bytes / es;
  // A counting pass first; the positions are worth a second pass only
  // when pairs can beat the full form (fewer changes than break_even).
  const size_t break_even = n_bytes > 16 ? (n_bytes - 16) / (4 + es) : 0;
  const int64_t found = FindChanges(now, before.data(), count, es, nullptr);
  *changed += found;
  if (found == 0) {
    const uint64_t checksum = Checksum64(now_bytes);
    out->resize(1 + 8);
    (*out)[0] = static_cast<uint8_t>(BucketKind::kUnchanged);
    PutU64(out, 1, checksum);
    return Status::OK();
  }
  std::vector<uint32_t> index;
  const bool pairs_ok = count < (uint64_t{1} << 32) &&  // u32 indices.
                        static_cast<size_t>(found) < break_even;
  if (pairs_ok) {
    index.reserve(static_cast<size_t>(found));
    FindChanges(now, before.data(), count, es, &index);
  }
  const size_t pairs_size = pairs_ok ? kPairsHeader + index.size() * es +
                                           GapBytes(index.data(), index.size())
                                     : SIZE_MAX;
  // Seconds each form takes.
  const double link = cost.link_bytes_per_second;
  const double full_s = static_cast<double>(1 + n_bytes) / link;
  const double pairs_s = static_cast<double>(pairs_size) / link;
  const double codec_s =
      static_cast<double>(n_bytes) / cost.codec_encode_bytes_per_second +
      static_cast<double>(n_bytes) / cost.codec_decode_bytes_per_second;
  const double best_s = std::min(full_s, pairs_s);
  std::string chunk;
  if (codec_s < best_s) {
    statestore::EncodeOptions options;
    options.transform = static_cast<int>(statestore::ByteTransform::kByteGroup);
    HY_RETURN_IF_ERROR(
        statestore::EncodeChunk(options, dtype, now_bytes, before, &chunk));
  }
  const size_t chunk_size = chunk.empty() ? SIZE_MAX : 1 + 8 + chunk.size();
  const double chunk_s = chunk.empty()
                             ? INFINITY
                             : codec_s + static_cast<double>(chunk_size) / link;
  if (pairs_s <= chunk_s && pairs_s < full_s) {
    uint8_t* val =
        StartPairs(Checksum64(now_bytes), index.data(), index.size(), es, out);
    for (size_t k = 0; k < index.size(); ++k) {
      std::memcpy(val + k * es, now + size_t{index[k]} * es, es);
    }
  } else if (chunk_s < full_s) {
    out->resize(chunk_size);
    (*out)[0] = static_cast<uint8_t>(BucketKind::kXorChunk);
    PutU64(out, 1, Checksum64(now_bytes));
    std::memcpy(out->data() + 9, chunk.data(), chunk.size());
  }
  // else: the full form is the cheapest; *out stays empty.
  return Status::OK();
}

Status DecodeBucket(ConstBytes wire, DType dtype, size_t es, ConstBytes before,
                    MutableBytes now, bool* unchanged) {
  (void)dtype;
  *unchanged = false;
  auto loss = [](const std::string& why) {
    return Status::DataLoss("reshard bucket: " + why);
  };
  if (wire.size() < 1) return loss("empty");
  const auto kind = static_cast<BucketKind>(wire.data()[0]);
  const uint8_t* body = wire.data() + 1;
  const size_t body_size = wire.size() - 1;
  if (kind == BucketKind::kFull) {
    if (body_size != now.size()) {
      return loss("full bucket of " + std::to_string(body_size) +
                  " bytes, expected " + std::to_string(now.size()));
    }
    if (body_size > 0) std::memcpy(now.data(), body, body_size);
    return Status::OK();
  }
  if (body_size < 8) return loss("truncated delta bucket");
  if (before.size() != now.size()) {
    return loss("delta bucket without a previous copy of the same size");
  }
  const uint64_t checksum = GetU64(body);
  switch (kind) {
    case BucketKind::kUnchanged:
      if (body_size != 8) return loss("bad unchanged bucket");
      if (Checksum64(before) != checksum) {
        return loss(
            "the receiver's previous copy is not what the sender last sent "
            "(checksum mismatch on an unchanged bucket)");
      }
      *unchanged = true;
      return Status::OK();
    case BucketKind::kPairs: {
      PairsView pairs;
      const uint64_t elements = es == 0 ? 0 : now.size() / es;
      HY_RETURN_IF_ERROR(ParsePairs(wire, es, elements, &pairs));
      if (now.data() != before.data() && !now.empty()) {
        std::memcpy(now.data(), before.data(), now.size());
      }
      for (uint64_t k = 0; k < pairs.count; ++k) {
        uint64_t i = 0;
        if (!pairs.gaps.Next(&i)) return loss("malformed pair positions");
        if (i >= elements) return loss("pair index out of range");
        std::memcpy(now.data() + i * es, pairs.values + k * es, es);
      }
      if (!pairs.gaps.AtEnd()) return loss("bytes past the last pair");
      break;
    }
    case BucketKind::kXorChunk: {
      Status s = statestore::DecodeChunk(ConstBytes(body + 8, body_size - 8),
                                         before, now);
      if (!s.ok()) {
        return loss(
            "cannot apply the delta (the receiver's previous copy is not what "
            "the sender last sent, or the bucket is damaged): " +
            s.ToString());
      }
      break;
    }
    default:
      return loss("unknown kind " + std::to_string(wire.data()[0]));
  }
  if (Checksum64(ConstBytes(now.data(), now.size())) != checksum) {
    return loss(
        "checksum mismatch after applying the delta: the receiver's previous "
        "copy is not what the sender last sent");
  }
  return Status::OK();
}

}  // namespace hy::reshard::internal
