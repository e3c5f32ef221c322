#include "wire.h"

#include <cstring>

#include "hy/common/hash.h"
#include "hy/statestore/codec.h"

namespace hy::reshard::internal {
namespace {

void PutU64(std::vector<uint8_t>* out, size_t at, uint64_t v) {
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

}  // namespace

Status EncodeDelta(DType dtype, size_t es, ConstBytes before,
                   std::vector<uint8_t>* bucket, int64_t* changed) {
  const size_t n_bytes = bucket->size() - 1;
  if (before.size() != n_bytes || es == 0 || n_bytes % es != 0) {
    return Status::Internal("EncodeDelta: bucket and previous copy differ");
  }
  const uint8_t* now = bucket->data() + 1;
  const size_t count = n_bytes / es;
  // Changed indices; a 64-bit word at a time skips unchanged stretches.
  std::vector<uint32_t> index;
  const bool small_index = count < (uint64_t{1} << 32);
  const size_t per_word = (es <= 8 && 8 % es == 0) ? 8 / es : 0;
  size_t i = 0;
  while (i < count) {
    const size_t byte = i * es;
    if (per_word != 0 && i % per_word == 0 && byte + 8 <= n_bytes) {
      uint64_t x, y;
      std::memcpy(&x, now + byte, 8);
      std::memcpy(&y, before.data() + byte, 8);
      if (x == y) {
        i += per_word;
        continue;
      }
    }
    if (Differs(now + byte, before.data() + byte, es)) {
      if (small_index) index.push_back(static_cast<uint32_t>(i));
      ++*changed;
    }
    ++i;
  }
  const uint64_t checksum = Checksum64(ConstBytes(now, n_bytes));
  if (*changed == 0) {
    bucket->resize(1 + 8);
    (*bucket)[0] = static_cast<uint8_t>(BucketKind::kUnchanged);
    PutU64(bucket, 1, checksum);
    return Status::OK();
  }
  const size_t pairs_size =
      small_index ? 1 + 16 + index.size() * (4 + es) : SIZE_MAX;
  std::string chunk;
  if (pairs_size > n_bytes / 8) {
    // Dense changes: try the codec's XOR delta (byte grouping + zstd).
    statestore::EncodeOptions options;
    options.transform = static_cast<int>(statestore::ByteTransform::kByteGroup);
    HY_RETURN_IF_ERROR(statestore::EncodeChunk(
        options, dtype, ConstBytes(now, n_bytes), before, &chunk));
  }
  const size_t chunk_size = chunk.empty() ? SIZE_MAX : 1 + 8 + chunk.size();
  if (pairs_size <= chunk_size && pairs_size < 1 + n_bytes) {
    std::vector<uint8_t> out(pairs_size);
    out[0] = static_cast<uint8_t>(BucketKind::kPairs);
    PutU64(&out, 1, checksum);
    PutU64(&out, 9, index.size());
    uint8_t* idx = out.data() + 17;
    std::memcpy(idx, index.data(), index.size() * 4);
    uint8_t* val = idx + index.size() * 4;
    for (size_t k = 0; k < index.size(); ++k) {
      std::memcpy(val + k * es, now + size_t{index[k]} * es, es);
    }
    *bucket = std::move(out);
  } else if (chunk_size < 1 + n_bytes) {
    std::vector<uint8_t> out(chunk_size);
    out[0] = static_cast<uint8_t>(BucketKind::kXorChunk);
    PutU64(&out, 1, checksum);
    std::memcpy(out.data() + 9, chunk.data(), chunk.size());
    *bucket = std::move(out);
  }
  // else: the full form already in *bucket is the smallest.
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
    std::memcpy(now.data(), body, body_size);
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
      if (body_size < 16) return loss("truncated pairs bucket");
      const uint64_t count = GetU64(body + 8);
      if (es == 0 || count > now.size() / es ||
          body_size != 16 + count * (4 + es)) {
        return loss("pairs bucket of the wrong length");
      }
      if (now.data() != before.data()) {
        std::memcpy(now.data(), before.data(), now.size());
      }
      const uint8_t* idx = body + 16;
      const uint8_t* val = idx + count * 4;
      for (uint64_t k = 0; k < count; ++k) {
        uint32_t i;
        std::memcpy(&i, idx + k * 4, 4);
        if (size_t{i} >= now.size() / es) return loss("pair index out of range");
        std::memcpy(now.data() + size_t{i} * es, val + k * es, es);
      }
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
