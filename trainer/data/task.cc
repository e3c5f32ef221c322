#include "hy/trainer/data/task.h"

#include <algorithm>
#include <string>

namespace hy::trainer {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
// Domain tags keep the sample stream and the sampler stream apart.
constexpr uint64_t kSampleDomain = 0x5341'4D50'4C45'0001ULL;   // "SAMPLE"
constexpr uint64_t kSamplerDomain = 0x5341'4D50'4C52'0002ULL;  // "SAMPLR"

// splitmix64's finalizer: a bijection on 64 bits with full avalanche.
uint64_t Mix64(uint64_t x) {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t HashTriple(uint64_t domain, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t h = Mix64(domain);
  h = Mix64(h ^ a);
  h = Mix64(h ^ b);
  return Mix64(h ^ c);
}

// Counter-based draws from a key: draw k is Mix64(key + k * golden).
class CounterStream {
 public:
  explicit CounterStream(uint64_t key) : key_(key) {}

  uint64_t Next() { return Mix64(key_ + (counter_++) * kGolden); }

  // Uniform in [lo, hi] (hi - lo is tiny, so the modulo bias is ~2^-58).
  int Uniform(int lo, int hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int>(Next() % span);
  }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

std::vector<int> Digits(CounterStream* rng, int n, bool no_leading_zero) {
  std::vector<int> d(n);
  for (int i = 0; i < n; ++i) {
    d[i] = (i == 0 && no_leading_zero && n > 1) ? rng->Uniform(1, 9)
                                                : rng->Uniform(0, 9);
  }
  return d;
}

// Decimal addition of two most-significant-first digit strings.
std::vector<int> AddDigits(const std::vector<int>& a,
                           const std::vector<int>& b) {
  std::vector<int> out;
  int carry = 0;
  for (size_t i = 0; i < std::max(a.size(), b.size()) || carry; ++i) {
    int s = carry;
    if (i < a.size()) s += a[a.size() - 1 - i];
    if (i < b.size()) s += b[b.size() - 1 - i];
    out.push_back(s % 10);
    carry = s / 10;
  }
  while (out.size() > 1 && out.back() == 0) out.pop_back();
  std::reverse(out.begin(), out.end());
  return out;
}

constexpr char kChars[kVocabSize + 1] = "0123456789_^$=RSA+";

}  // namespace

Sample Generate(const TaskConfig& config, uint64_t seed, uint64_t iteration,
                uint64_t sample_index) {
  CounterStream rng(HashTriple(kSampleDomain ^ seed, iteration, sample_index,
                               /*c=*/0));
  // Defensive clamps: a violated REQUIRES must not crash or loop.
  const int lo = std::clamp(config.min_digits, 1, kMaxTaskDigits);
  const int hi = std::clamp(config.max_digits, lo, kMaxTaskDigits);
  Sample s;
  if (!config.kinds.empty()) {
    const int pick = rng.Uniform(0, static_cast<int>(config.kinds.size()) - 1);
    s.kind = config.kinds[pick];
  }
  s.prompt.push_back(kBos);
  switch (s.kind) {
    case TaskKind::kReverse:
    case TaskKind::kSort: {
      std::vector<int> d = Digits(&rng, rng.Uniform(lo, hi), false);
      s.prompt.push_back(s.kind == TaskKind::kReverse ? kRev : kSort);
      s.prompt.insert(s.prompt.end(), d.begin(), d.end());
      s.answer = d;
      if (s.kind == TaskKind::kReverse) {
        std::reverse(s.answer.begin(), s.answer.end());
      } else {
        std::sort(s.answer.begin(), s.answer.end());
      }
      break;
    }
    case TaskKind::kAdd: {
      std::vector<int> a = Digits(&rng, rng.Uniform(lo, hi), true);
      std::vector<int> b = Digits(&rng, rng.Uniform(lo, hi), true);
      s.prompt.push_back(kAdd);
      s.prompt.insert(s.prompt.end(), a.begin(), a.end());
      s.prompt.push_back(kPlus);
      s.prompt.insert(s.prompt.end(), b.begin(), b.end());
      s.answer = AddDigits(a, b);
      break;
    }
  }
  s.prompt.push_back(kSep);
  return s;
}

uint64_t SamplingSeed(uint64_t seed, uint64_t iteration, uint64_t sample_index,
                      uint64_t token_position) {
  return Mix64(HashTriple(kSamplerDomain ^ seed, iteration, sample_index,
                          token_position));
}

double Reward(const Sample& sample, const std::vector<int>& response) {
  const std::vector<int>& a = sample.answer;
  auto eos = std::find(response.begin(), response.end(), kEos);
  const bool has_eos = eos != response.end();
  const std::vector<int> r(response.begin(), eos);
  if (has_eos && r == a) return 1.0;
  const size_t denom = std::max(a.size(), r.size());
  if (denom == 0) return 0.0;
  size_t matches = 0;
  for (size_t i = 0; i < std::min(a.size(), r.size()); ++i) {
    if (r[i] == a[i]) ++matches;
  }
  return 0.5 * static_cast<double>(matches) / static_cast<double>(denom);
}

std::vector<int> SftSequence(const Sample& sample) {
  std::vector<int> seq = sample.prompt;
  seq.insert(seq.end(), sample.answer.begin(), sample.answer.end());
  seq.push_back(kEos);
  return seq;
}

std::string Detokenize(const std::vector<int>& tokens) {
  std::string out;
  out.reserve(tokens.size());
  for (int t : tokens) {
    out.push_back(t >= 0 && t < kVocabSize ? kChars[t] : '?');
  }
  return out;
}

Result<std::vector<int>> Tokenize(std::string_view text) {
  std::vector<int> out;
  out.reserve(text.size());
  const std::string_view chars(kChars, kVocabSize);
  for (size_t i = 0; i < text.size(); ++i) {
    const size_t id = chars.find(text[i]);
    if (id == std::string_view::npos) {
      return Status::InvalidArgument(
          "Tokenize: character '" + std::string(1, text[i]) + "' at offset " +
          std::to_string(i) + " is not in the vocabulary");
    }
    out.push_back(static_cast<int>(id));
  }
  return out;
}

}  // namespace hy::trainer
