// hy_bench_tokenizer: encode throughput of hy::trainer::Tokenizer on one
// core, and of Hugging Face's Rust implementation (PyPI `tokenizers`,
// encode_batch_fast on one thread, run by
// tests/trainer/tokenizer/tokenize_reference.py on the same strings) side by
// side.
//
//   hy_bench_tokenizer [--json] [--reps N] [--strings N] [--mib X]
//                      [--tokenizer PATH]... [--no-rust]
//
// Corpora: "mixed", the strings of the tokenizer comparison test (prose,
// CJK, emoji, combining marks, digits, whitespace, code, special tokens,
// random code points), and "prose+code", documents of a few KiB. MB/s counts
// bytes of UTF-8 text, 10^6 per MB, per second of CPU time (user + system;
// the machine is shared, wall time is noisy). "hy cold" is the first pass
// over the corpus with an empty word cache; "hy" and "rust" are the best of
// --reps passes after a warm-up pass. Tokenizers default to the Qwen3 and
// Llama 3 files of tests/data/tokenizers; the Rust column needs the
// venv's interpreter with `tokenizers` (scripts/install-deps.sh), and the
// benchmark fails without it unless --no-rust.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "bench_util.h"
#include "hy/trainer/tokenizer/tokenizer.h"
#include "tokenizer_corpus.h"

namespace hy::bench {
namespace {

namespace fs = std::filesystem;
using trainer::Tokenizer;

struct Flags {
  bool json = false;
  bool rust = true;
  int reps = 3;
  size_t strings = 10000;
  double mib = 4;
  std::vector<std::string> tokenizers;
};

struct Corpus {
  std::string name;
  std::vector<std::string> texts;
  std::string jsonl;  // the same strings for the reference
  size_t bytes = 0;
};

const fs::path kRoot = HY_SOURCE_DIR;
const fs::path kData = HY_TOKENIZER_DATA_DIR;

// Runs `cmd` and returns its stdout; empty on failure.
std::string Capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) out.clear();
  return out;
}

// CPU seconds (user + system) of this process that fn() takes. The machine
// the benchmarks run on is shared, so CPU time, not wall time, is what is
// measured on both sides (the Python script reports time.process_time()).
double CpuSeconds(const std::function<void()>& fn) {
  auto now = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
  };
  const double t0 = now();
  fn();
  return now() - t0;
}

// One pass over the corpus; returns the number of tokens.
size_t EncodeAll(const Tokenizer& tok, const Corpus& c) {
  size_t tokens = 0;
  std::vector<int32_t> ids;
  for (const std::string& t : c.texts) {
    ids.clear();
    Status s = tok.EncodeAppend(t, &ids);
    if (!s.ok()) {
      std::fprintf(stderr, "hy_bench_tokenizer: %s\n", s.ToString().c_str());
      std::exit(1);
    }
    tokens += ids.size();
  }
  return tokens;
}

// Returns false when the Rust side counted a different number of tokens.
bool Run(const Flags& flags, const std::string& path, const Corpus& c) {
  // The directory's name: .../qwen3/tokenizer.json gives "qwen3".
  const fs::path file = fs::is_directory(path)
                            ? fs::path(path) / "tokenizer.json"
                            : fs::path(path);
  const std::string model = file.parent_path().filename().string();
  size_t tokens = 0;
  std::unique_ptr<Tokenizer> tok;
  double load_s = Seconds([&] {
    auto t = Tokenizer::Load(path);
    if (!t.ok()) {
      std::fprintf(stderr, "hy_bench_tokenizer: %s\n",
                   t.status().ToString().c_str());
      std::exit(1);
    }
    tok = std::move(t).value();
  });
  const double cold_s = CpuSeconds([&] { tokens = EncodeAll(*tok, c); });
  double best = 1e30;
  for (int r = 0; r < flags.reps; ++r) {
    best = std::min(best, CpuSeconds([&] { EncodeAll(*tok, c); }));
  }
  const double mb = c.bytes / 1e6;
  double rust_mbps = 0;
  size_t rust_tokens = 0;
  if (flags.rust) {
    const std::string cmd =
        std::string("'") + HY_PYTHON_PATH + "' '" +
        (kRoot / "tests/trainer/tokenizer/tokenize_reference.py").string() +
        "' bench '" + file.string() + "' '" + c.jsonl + "' " +
        std::to_string(flags.reps);
    const auto j = nlohmann::json::parse(Capture(cmd), nullptr, false);
    if (j.is_discarded() || !j.contains("mb_per_s")) {
      std::fprintf(stderr,
                   "hy_bench_tokenizer: %s failed (--no-rust skips it)\n",
                   cmd.c_str());
      std::exit(1);
    }
    rust_mbps = j["mb_per_s"].get<double>();
    rust_tokens = j["tokens"].get<size_t>();
  }
  const double hy_mbps = mb / best;
  const double ratio = rust_mbps > 0 ? hy_mbps / rust_mbps : 0;
  if (flags.json) {
    std::printf(
        "{\"tokenizer\":\"%s\",\"corpus\":\"%s\",\"mb\":%.2f,\"tokens\":%zu,"
        "\"load_s\":%.2f,\"hy_cold_mbps\":%.1f,\"hy_mbps\":%.1f,"
        "\"rust_mbps\":%.1f,\"rust_tokens\":%zu,\"ratio\":%.2f}\n",
        model.c_str(), c.name.c_str(), mb, tokens, load_s, mb / cold_s, hy_mbps,
        rust_mbps, rust_tokens, ratio);
  } else {
    std::printf(
        "| %-17s | %-10s | %5.2f | %8zu | %6.2f | %12.1f | %8.1f | %9.1f | "
        "%6.2fx |%s\n",
        model.c_str(), c.name.c_str(), mb, tokens, load_s, mb / cold_s, hy_mbps,
        rust_mbps, ratio,
        flags.rust && rust_tokens != tokens ? " token counts differ!" : "");
  }
  std::fflush(stdout);
  return !flags.rust || rust_tokens == tokens;
}

int Main(int argc, char** argv) {
  Flags flags;
  CLI::App app(
      "Encode throughput of hy's tokenizer on one core beside Hugging "
      "Face's Rust tokenizers",
      "hy_bench_tokenizer");
  AddJsonFlag(&app, &flags.json);
  app.add_flag("--rust,!--no-rust", flags.rust,
               "Run Hugging Face's tokenizers beside (--no-rust: only hy)");
  app.add_option("--reps", flags.reps, "Repetitions (the best counts)")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--strings", flags.strings, "Strings per corpus")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--mib", flags.mib, "Text per corpus in MiB")
      ->capture_default_str()
      ->check(AtLeast(0.01));
  app.add_option("--tokenizer", flags.tokenizers,
                 "A tokenizer.json (repeatable; default: Qwen3 and Llama 3)");
  if (int code = ParseFlags(&app, argc, argv); code >= 0) return code;
  if (flags.tokenizers.empty()) {
    for (const char* m : {"qwen3", "llama3"}) {
      const fs::path p = kData / m / "tokenizer.json";
      if (!fs::exists(p)) {
        std::fprintf(stderr,
                     "hy_bench_tokenizer: no %s (the repository carries it in "
                     "tests/data/tokenizers; or pass --tokenizer)\n",
                     p.c_str());
        return 1;
      }
      flags.tokenizers.push_back(p.string());
    }
  }

  const fs::path tmp = fs::temp_directory_path() /
                       ("hy_bench_tokenizer_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  std::vector<Corpus> corpora(2);
  corpora[0].name = "mixed";
  corpora[0].texts =
      trainer::testing::MakeTokenizerCorpus(flags.strings, 20240611);
  corpora[1].name = "prose+code";
  corpora[1].texts = trainer::testing::MakeProseCodeCorpus(
      static_cast<size_t>(flags.mib * (1 << 20)), 7);
  for (Corpus& c : corpora) {
    for (const std::string& t : c.texts) c.bytes += t.size();
    c.jsonl = (tmp / (c.name + ".jsonl")).string();
    if (!trainer::testing::WriteJsonLines(c.texts, c.jsonl)) {
      std::fprintf(stderr, "hy_bench_tokenizer: cannot write %s\n",
                   c.jsonl.c_str());
      return 1;
    }
  }
  if (!flags.json) {
    std::printf(
        "| tokenizer         | corpus     |    MB |   tokens | load s | hy "
        "cold MB/s |  hy MB/s | rust MB/s | hy/rust |\n");
    std::printf(
        "|-------------------|------------|-------|----------|--------|--------"
        "------|----------|-----------|---------|\n");
  }
  bool agree = true;
  for (const std::string& path : flags.tokenizers) {
    for (const Corpus& c : corpora) agree = Run(flags, path, c) && agree;
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return agree ? 0 : 1;
}

}  // namespace
}  // namespace hy::bench

int main(int argc, char** argv) { return hy::bench::Main(argc, argv); }
