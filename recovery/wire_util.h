// Little helpers to pack and unpack the messages recovery sends, and to
// agree on how many rounds to send them in (internal).
#ifndef HY_RECOVERY_WIRE_UTIL_H_
#define HY_RECOVERY_WIRE_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/result.h"
#include "hy/reshard/transport.h"

namespace hy::recovery::internal {

inline void PutU64(std::vector<uint8_t>* out, uint64_t v) {
  uint8_t b[8];
  std::memcpy(b, &v, 8);
  out->insert(out->end(), b, b + 8);
}

inline void PutBytes(std::vector<uint8_t>* out, const void* p, size_t n) {
  PutU64(out, n);
  const auto* c = static_cast<const uint8_t*>(p);
  out->insert(out->end(), c, c + n);
}

// Reads from a received message; every read checks the bounds.
class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& in) : in_(in) {}
  bool U64(uint64_t* v) {
    if (in_.size() - pos_ < 8) return false;
    std::memcpy(v, in_.data() + pos_, 8);
    pos_ += 8;
    return true;
  }
  // A length-prefixed byte string, returned as a view into the message.
  bool Bytes(ConstBytes* out) {
    uint64_t n = 0;
    if (!U64(&n) || in_.size() - pos_ < n) return false;
    *out = ConstBytes(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool String(std::string* out) {
    ConstBytes b;
    if (!Bytes(&b)) return false;
    out->assign(reinterpret_cast<const char*>(b.data()), b.size());
    return true;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  const std::vector<uint8_t>& in_;
  size_t pos_ = 0;
};

// Groups items of the given sizes, in order, into batches of at most
// `budget` bytes (an item larger than that is a batch of its own): the index
// of each batch's first item; empty when there are no items.
inline std::vector<size_t> BatchStarts(const std::vector<uint64_t>& sizes,
                                       uint64_t budget) {
  std::vector<size_t> starts;
  uint64_t in_batch = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i == 0 || in_batch + sizes[i] > budget) {
      starts.push_back(i);
      in_batch = 0;
    }
    in_batch += sizes[i];
  }
  return starts;
}

// Collective: the largest `mine` over all ranks (how many rounds the
// busiest rank needs). Returns the transport's errors.
inline Result<uint64_t> MaxOverRanks(reshard::Transport* t, uint64_t mine) {
  std::vector<std::vector<uint8_t>> all;
  HY_RETURN_IF_ERROR(t->AllGatherV(ConstBytes(&mine, sizeof(mine)), &all));
  uint64_t most = 0;
  for (const auto& v : all) {
    uint64_t n = 0;
    if (v.size() == sizeof(n)) std::memcpy(&n, v.data(), sizeof(n));
    most = std::max(most, n);
  }
  return most;
}

}  // namespace hy::recovery::internal

#endif  // HY_RECOVERY_WIRE_UTIL_H_
