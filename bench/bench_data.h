// Synthetic but realistic training state for the benchmarks: Gaussian
// weights and the Adam moments and weights after simulated optimizer steps.

#ifndef HY_BENCH_BENCH_DATA_H_
#define HY_BENCH_BENCH_DATA_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hy::bench {

struct AdamState {
  std::vector<float> w_prev;  // Weights before the last step.
  std::vector<float> w;       // Weights after the last step.
  std::vector<float> m;       // First moment after the last step.
  std::vector<float> v;       // Second moment after the last step.
  uint64_t seed = 0;          // Seeds the per-element gradient means.
  int steps = 0;
};

// n weights ~ N(0, 0.02), then `steps` Adam steps (beta1 0.9, beta2 0.999,
// eps 1e-8, bias-corrected) with learning rate `lr` on gradients that are
// noise ~ N(0, 1e-3) around a fixed per-element mean, as mini-batch
// gradients are.
AdamState SimulateAdam(size_t n, int steps, float lr, uint64_t seed);

// The weights one more step on from `s` (same moments) with another lr.
std::vector<float> StepAgain(const AdamState& s, float lr, uint64_t seed);

// f32 -> bf16 (round to nearest even), as raw bytes.
std::vector<uint8_t> ToBf16Bytes(const std::vector<float>& f);
std::vector<uint8_t> ToBytes(const std::vector<float>& f);

}  // namespace hy::bench

#endif  // HY_BENCH_BENCH_DATA_H_
