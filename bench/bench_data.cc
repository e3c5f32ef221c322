#include "bench_data.h"

#include <cmath>
#include <cstring>

#include "hy/common/bf16.h"

namespace hy::bench {

namespace {

// splitmix64: a fast, good-enough generator for synthetic data.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Two independent N(0, 1) samples (Box-Muller).
  void Gauss2(float* a, float* b) {
    const uint64_t r = Next();
    const double u1 = (static_cast<double>(r >> 40) + 1.0) / 16777217.0;
    const double u2 = static_cast<double>(r & 0xFFFFFF) / 16777216.0;
    const double rad = std::sqrt(-2.0 * std::log(u1));
    *a = static_cast<float>(rad * std::cos(2 * M_PI * u2));
    *b = static_cast<float>(rad * std::sin(2 * M_PI * u2));
  }
  void FillGauss(std::vector<float>* v, float sigma) {
    for (size_t i = 0; i + 1 < v->size(); i += 2) {
      Gauss2(&(*v)[i], &(*v)[i + 1]);
      (*v)[i] *= sigma;
      (*v)[i + 1] *= sigma;
    }
  }

 private:
  uint64_t s_;
};

constexpr float kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f;

void AdamStep(const std::vector<float>& grad_mean, float lr, int t, Rng* rng,
              std::vector<float>* w, std::vector<float>* m,
              std::vector<float>* v, std::vector<float>* noise) {
  rng->FillGauss(noise, 1e-3f);
  const float c1 = 1.0f - std::pow(kBeta1, static_cast<float>(t));
  const float c2 = 1.0f - std::pow(kBeta2, static_cast<float>(t));
  for (size_t i = 0; i < w->size(); ++i) {
    const float g = grad_mean[i] + (*noise)[i];
    (*m)[i] = kBeta1 * (*m)[i] + (1 - kBeta1) * g;
    (*v)[i] = kBeta2 * (*v)[i] + (1 - kBeta2) * g * g;
    (*w)[i] -= lr * ((*m)[i] / c1) / (std::sqrt((*v)[i] / c2) + kEps);
  }
}

std::vector<float> GradMean(size_t n, uint64_t seed) {
  std::vector<float> g(n);
  Rng(seed ^ 0xA5A5).FillGauss(&g, 2e-4f);
  return g;
}

}  // namespace

AdamState SimulateAdam(size_t n, int steps, float lr, uint64_t seed) {
  Rng rng(seed);
  AdamState s;
  s.seed = seed;
  s.steps = steps;
  s.w.resize(n);
  rng.FillGauss(&s.w, 0.02f);
  s.m.assign(n, 0.0f);
  s.v.assign(n, 0.0f);
  const std::vector<float> mean = GradMean(n, seed);
  std::vector<float> noise(n);
  for (int t = 1; t <= steps; ++t) {
    if (t == steps) s.w_prev = s.w;
    AdamStep(mean, lr, t, &rng, &s.w, &s.m, &s.v, &noise);
  }
  return s;
}

std::vector<float> StepAgain(const AdamState& s, float lr, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> w = s.w, m = s.m, v = s.v, noise(w.size());
  AdamStep(GradMean(w.size(), s.seed), lr, s.steps + 1, &rng, &w, &m, &v,
           &noise);
  return w;
}

std::vector<uint8_t> ToBf16Bytes(const std::vector<float>& f) {
  std::vector<uint8_t> out(f.size() * 2);
  CastF32ToBf16(reinterpret_cast<const uint8_t*>(f.data()), out.data(),
                f.size());
  return out;
}

std::vector<uint8_t> ToBytes(const std::vector<float>& f) {
  std::vector<uint8_t> out(f.size() * 4);
  std::memcpy(out.data(), f.data(), out.size());
  return out;
}

}  // namespace hy::bench
