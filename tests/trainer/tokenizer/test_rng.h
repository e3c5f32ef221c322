// Rng: splitmix64, for the tests' seeded generators (the tokenizer corpus,
// the chat conversations): the same values for the same seed on every
// platform, unlike the std distributions.
//
// Thread-safety: none; one per generator.

#ifndef HY_TESTS_TRAINER_TEST_RNG_H_
#define HY_TESTS_TRAINER_TEST_RNG_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hy::trainer::testing {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform enough in [0, n). REQUIRES: n > 0.
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }
  // True with probability 1/n.
  bool OneIn(size_t n) { return Below(n) == 0; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Below(v.size())];
  }

 private:
  uint64_t state_;
};

}  // namespace hy::trainer::testing

#endif  // HY_TESTS_TRAINER_TEST_RNG_H_
