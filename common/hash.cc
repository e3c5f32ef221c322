#include "hy/common/hash.h"

#include <xxhash.h>
// On x86-64, libxxhash's own runtime dispatch picks its AVX2 or AVX-512
// kernels where the CPU has them (the same hashes, about twice as fast as
// the SSE2 baseline the library is built for): every checksum and content
// address of the load and save paths goes through here.
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>
#endif

namespace hy {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Hash128 FromXxh(XXH128_hash_t h) { return Hash128{h.low64, h.high64}; }

}  // namespace

std::string Hash128::ToHex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  uint8_t bytes[16];
  EncodeTo(bytes);
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xF];
  }
  return out;
}

Result<Hash128> Hash128::FromHex(std::string_view hex) {
  if (hex.size() != 32) {
    return Status::InvalidArgument("a 128-bit hash needs 32 hex digits, got " +
                                   std::to_string(hex.size()));
  }
  uint8_t bytes[16];
  for (int i = 0; i < 16; ++i) {
    const int hi = HexValue(hex[2 * i]);
    const int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return Status::InvalidArgument("not a hex digit in '" + std::string(hex) +
                                     "'");
    }
    bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return DecodeFrom(bytes);
}

void Hash128::EncodeTo(uint8_t out[16]) const {
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<uint8_t>(high >> (56 - 8 * i));
    out[8 + i] = static_cast<uint8_t>(low >> (56 - 8 * i));
  }
}

Hash128 Hash128::DecodeFrom(const uint8_t in[16]) {
  Hash128 h;
  for (int i = 0; i < 8; ++i) {
    h.high = h.high << 8 | in[i];
    h.low = h.low << 8 | in[8 + i];
  }
  return h;
}

uint64_t Checksum64(ConstBytes data) {
  return XXH3_64bits(data.data(), data.size());
}

uint64_t Checksum64(ConstBytes data, uint64_t seed) {
  return XXH3_64bits_withSeed(data.data(), data.size(), seed);
}

Hash128 ContentHash(ConstBytes data) {
  return FromXxh(XXH3_128bits(data.data(), data.size()));
}

struct Hasher64::State {
  XXH3_state_t* xxh = XXH3_createState();
};

Hasher64::Hasher64() : state_(new State) { XXH3_64bits_reset(state_->xxh); }

Hasher64::Hasher64(uint64_t seed) : state_(new State) {
  XXH3_64bits_reset_withSeed(state_->xxh, seed);
}

Hasher64::~Hasher64() { XXH3_freeState(state_->xxh); }

void Hasher64::Update(ConstBytes data) {
  XXH3_64bits_update(state_->xxh, data.data(), data.size());
}

uint64_t Hasher64::Digest() const { return XXH3_64bits_digest(state_->xxh); }

struct Hasher128::State {
  XXH3_state_t* xxh = XXH3_createState();
};

Hasher128::Hasher128() : state_(new State) { XXH3_128bits_reset(state_->xxh); }

Hasher128::~Hasher128() { XXH3_freeState(state_->xxh); }

void Hasher128::Update(ConstBytes data) {
  XXH3_128bits_update(state_->xxh, data.data(), data.size());
}

Hash128 Hasher128::Digest() const {
  return FromXxh(XXH3_128bits_digest(state_->xxh));
}

}  // namespace hy
