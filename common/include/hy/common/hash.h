// Hashes used across hy's formats, all from libxxhash (XXH3, seed 0):
//
//   Checksum64(bytes)   xxh3-64: integrity checksums (chunk raw bytes, headers)
//   ContentHash(bytes)  xxh3-128: content addresses (a chunk's key in the
//   store,
//                       the identity of a delta base)
//
// XXH3 is not cryptographic: content addressing assumes non-adversarial
// input (training state written by the job itself), as Git's pre-SHA-256
// object store did. The outputs are part of the on-disk format: their seed and
// byte order below never change.
//
// Thread-safety: all functions are pure; Hasher128 is not thread-safe.

#ifndef HY_COMMON_HASH_H_
#define HY_COMMON_HASH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "hy/common/bytes.h"
#include "hy/common/result.h"

namespace hy {

struct Hash128 {
  uint64_t low = 0;
  uint64_t high = 0;

  bool IsZero() const { return low == 0 && high == 0; }

  // 32 lowercase hex digits, high word first (the canonical XXH128 order).
  std::string ToHex() const;
  // Returns InvalidArgument unless `hex` is exactly 32 hex digits.
  static Result<Hash128> FromHex(std::string_view hex);

  // 16 bytes, big-endian canonical form (XXH128_canonical_t): sorts like hex.
  void EncodeTo(uint8_t out[16]) const;
  static Hash128 DecodeFrom(const uint8_t in[16]);

  friend bool operator==(const Hash128& a, const Hash128& b) {
    return a.low == b.low && a.high == b.high;
  }
  friend bool operator!=(const Hash128& a, const Hash128& b) {
    return !(a == b);
  }
  friend bool operator<(const Hash128& a, const Hash128& b) {
    return a.high != b.high ? a.high < b.high : a.low < b.low;
  }
};

uint64_t Checksum64(ConstBytes data);
// xxh3-64 with a seed: binds a checksum to a context (the seed) as well as
// to the bytes.
uint64_t Checksum64(ConstBytes data, uint64_t seed);
Hash128 ContentHash(ConstBytes data);

// Incremental xxh3-64 over several pieces; Checksum64 of their
// concatenation equals Digest().
class Hasher64 {
 public:
  Hasher64();
  explicit Hasher64(uint64_t seed);  // As Checksum64(bytes, seed).
  ~Hasher64();
  Hasher64(const Hasher64&) = delete;
  Hasher64& operator=(const Hasher64&) = delete;

  void Update(ConstBytes data);
  uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Incremental xxh3-128 over several pieces; ContentHash of their
// concatenation equals Digest().
class Hasher128 {
 public:
  Hasher128();
  ~Hasher128();
  Hasher128(const Hasher128&) = delete;
  Hasher128& operator=(const Hasher128&) = delete;

  void Update(ConstBytes data);
  Hash128 Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hy

#endif  // HY_COMMON_HASH_H_
