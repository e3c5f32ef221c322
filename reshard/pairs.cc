#include "pairs.h"

#include <string>

namespace hy::reshard::internal {

size_t GapBytes(const uint32_t* index, size_t count) {
  size_t wide = 0;
  int64_t prev = -1;
  for (size_t k = 0; k < count; ++k) {
    wide += static_cast<int64_t>(index[k]) - prev >= 256;
    prev = index[k];
  }
  return count + 4 * wide;
}

uint8_t* StartPairs(uint64_t checksum, const uint32_t* index, size_t count,
                    size_t es, WireBuffer* out) {
  const size_t gaps_at = kPairsHeader + count * es;
  // Room for every gap escaped, and the four bytes each gap writes past
  // itself.
  out->resize(gaps_at + 5 * count + 4);
  uint8_t* p = out->data();
  p[0] = static_cast<uint8_t>(BucketKind::kPairs);
  const uint64_t n = count;
  std::memcpy(p + 1, &checksum, 8);
  std::memcpy(p + 9, &n, 8);
  uint8_t* g = p + gaps_at;
  int64_t prev = -1;
  for (size_t k = 0; k < count; ++k) {
    // Branch-free: both forms are written, the cursor moves past one.
    const uint32_t gap = static_cast<uint32_t>(index[k] - prev);
    const bool narrow = gap < 256;
    g[0] = narrow ? static_cast<uint8_t>(gap) : 0;
    std::memcpy(g + 1, &gap, 4);
    g += narrow ? 1 : 5;
    prev = index[k];
  }
  out->resize(static_cast<size_t>(g - p));
  return out->data() + kPairsHeader;
}

Status ParsePairs(ConstBytes bucket, size_t es, uint64_t elements,
                  PairsView* view) {
  auto loss = [](const std::string& why) {
    return Status::DataLoss("reshard bucket: " + why);
  };
  if (bucket.size() < kPairsHeader ||
      bucket.data()[0] != static_cast<uint8_t>(BucketKind::kPairs)) {
    return loss("truncated pairs bucket");
  }
  std::memcpy(&view->checksum, bucket.data() + 1, 8);
  std::memcpy(&view->count, bucket.data() + 9, 8);
  const uint64_t count = view->count;
  const uint64_t body = bucket.size() - kPairsHeader;
  // Each gap takes one to five bytes.
  if (es == 0 || count > elements || body < count * (es + 1) ||
      body > count * (es + 5)) {
    return loss("pairs bucket of the wrong length for " +
                std::to_string(count) + " changes");
  }
  view->values = bucket.data() + kPairsHeader;
  view->gaps =
      GapReader(view->values + count * es, bucket.data() + bucket.size());
  return Status::OK();
}

}  // namespace hy::reshard::internal
