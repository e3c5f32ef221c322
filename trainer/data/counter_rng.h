// Counter-based random draws (splitmix64), internal to hy_trainer_data: a
// draw is a pure function of (key, counter), so any process computing the
// same draws gets the same values without sharing state. task.cc keeps its
// own copy of the same construction.
//
// Thread-safety: Mix64 is pure; a CounterStream is a value, not shared.

#ifndef HY_TRAINER_DATA_COUNTER_RNG_H_
#define HY_TRAINER_DATA_COUNTER_RNG_H_

#include <cstdint>

namespace hy::trainer {

inline constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;

// splitmix64's finalizer: a bijection on 64 bits with full avalanche.
inline uint64_t Mix64(uint64_t x) {
  x += kGoldenGamma;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// A key from a domain tag (keeps unrelated streams apart) and two values.
inline uint64_t MixKey(uint64_t domain, uint64_t a, uint64_t b) {
  return Mix64(Mix64(Mix64(domain) ^ a) ^ b);
}

// Draw k of a stream is Mix64(key + k * golden).
class CounterStream {
 public:
  explicit CounterStream(uint64_t key) : key_(key) {}

  uint64_t Next() { return Mix64(key_ + (counter_++) * kGoldenGamma); }

  // Uniform in [0, n) up to a modulo bias below n / 2^64.
  // REQUIRES: n > 0.
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_DATA_COUNTER_RNG_H_
