// hy_bench_codec: compression ratio and encode/decode throughput of the chunk
// codec on synthetic training state, one thread and all threads.
//
//   hy_bench_codec [--json] [--size-mib N] [--chunk-kib N] [--reps N]
//
// Each row encodes a 64 MiB tensor (by default) cut into 1 MiB chunks, then
// decodes it and checks the bytes. MB/s counts raw (decoded) bytes, 10^6 per
// MB; the time is the best of --reps runs, since the machine is shared.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_data.h"
#include "bench_flags.h"
#include "bench_util.h"
#include "hy/common/thread_pool.h"
#include "hy/statestore/codec.h"

namespace hy::bench {
namespace {

using statestore::DecodeJob;
using statestore::EncodeJob;
using statestore::EncodeOptions;

struct Flags {
  bool json = false;
  size_t size_mib = 64;
  size_t chunk_kib = 1024;
  int reps = 3;
  std::vector<int> formats = {2, 1};  // Chunk format versions to run.
};

struct Case {
  std::string data;
  std::string mode;
  DType dtype;
  const std::vector<uint8_t>* raw;
  const std::vector<uint8_t>* base;  // Null: no delta.
  EncodeOptions options;
};

void Die(const Status& s, const std::string& what) {
  std::fprintf(stderr, "hy_bench_codec: %s: %s\n", what.c_str(),
               s.ToString().c_str());
  std::exit(1);
}

void RunCase(const Flags& flags, const Case& in, size_t threads,
             int format) {
  Case c = in;
  c.options.format_version = format;
  c.mode = "v" + std::to_string(format) + " " + c.mode;
  const size_t chunk = flags.chunk_kib * 1024;
  const std::vector<uint8_t>& raw = *c.raw;
  const size_t n_chunks = (raw.size() + chunk - 1) / chunk;
  // ParallelFor runs on the caller too: a pool of threads-1 gives `threads`.
  std::unique_ptr<ThreadPool> pool;
  if (threads > 1) pool = std::make_unique<ThreadPool>(threads - 1);

  std::vector<std::string> encoded(n_chunks);
  std::vector<EncodeJob> ejobs(n_chunks);
  std::vector<uint8_t> out(raw.size());
  std::vector<DecodeJob> djobs(n_chunks);
  for (size_t i = 0; i < n_chunks; ++i) {
    const size_t off = i * chunk, len = std::min(chunk, raw.size() - off);
    ejobs[i].dtype = c.dtype;
    ejobs[i].raw = ConstBytes(raw).subspan(off, len);
    if (c.base) ejobs[i].base = ConstBytes(*c.base).subspan(off, len);
    ejobs[i].out = &encoded[i];
    djobs[i].base = ejobs[i].base;
    djobs[i].out = MutableBytes(out.data() + off, len);
  }
  double enc_s = 1e30, dec_s = 1e30;
  for (int r = 0; r < flags.reps; ++r) {
    enc_s = std::min(enc_s, Seconds([&] {
                       Status s = statestore::EncodeChunks(c.options,
                                                           pool.get(), &ejobs);
                       if (!s.ok()) Die(s, "encode " + c.data + "/" + c.mode);
                     }));
  }
  size_t encoded_bytes = 0;
  for (size_t i = 0; i < n_chunks; ++i) {
    djobs[i].encoded = encoded[i];
    encoded_bytes += encoded[i].size();
  }
  for (int r = 0; r < flags.reps; ++r) {
    dec_s = std::min(dec_s, Seconds([&] {
                       Status s = statestore::DecodeChunks(pool.get(), &djobs);
                       if (!s.ok()) Die(s, "decode " + c.data + "/" + c.mode);
                     }));
  }
  if (!c.options.cast_to_bf16 && out != raw) {
    Die(Status::Internal("decoded bytes differ"), c.data + "/" + c.mode);
  }
  const double ratio = static_cast<double>(raw.size()) / encoded_bytes;
  // For bf16 deltas: the share of elements that changed, and the ratio an
  // ideal order-0 entropy coder of the 16-bit XOR values would reach.
  std::string delta_info;
  if (c.base && c.dtype == DType::kBF16) {
    std::vector<uint64_t> hist(1 << 16, 0);
    const size_t n = raw.size() / 2;
    for (size_t i = 0; i < n; ++i) {
      uint16_t a, b;
      std::memcpy(&a, raw.data() + 2 * i, 2);
      std::memcpy(&b, c.base->data() + 2 * i, 2);
      ++hist[a ^ b];
    }
    double bits = 0;
    for (uint64_t h : hist) {
      if (h) bits -= h * std::log2(static_cast<double>(h) / n);
    }
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%.1f%% changed, H0 bound %.1fx",
                  100.0 * (n - hist[0]) / n, 16.0 * n / bits);
    delta_info = buf;
  }
  const double enc_mbps = raw.size() / enc_s / 1e6;
  const double dec_mbps = raw.size() / dec_s / 1e6;
  if (flags.json) {
    std::printf(
        "{\"data\":\"%s\",\"mode\":\"%s\",\"threads\":%zu,\"ratio\":%.3f,"
        "\"encode_mbps\":%.0f,\"decode_mbps\":%.0f,\"note\":\"%s\"}\n",
        c.data.c_str(), c.mode.c_str(), threads, ratio, enc_mbps, dec_mbps,
        delta_info.c_str());
  } else {
    std::printf("| %-20s | %-21s | %7zu | %7.3f | %11.0f | %11.0f | %s\n",
                c.data.c_str(), c.mode.c_str(), threads, ratio, enc_mbps,
                dec_mbps, delta_info.c_str());
  }
  std::fflush(stdout);
}

EncodeOptions Opts(int transform, bool cast = false) {
  EncodeOptions o;
  o.transform = transform;
  o.cast_to_bf16 = cast;
  return o;
}

int Main(int argc, char** argv) {
  Flags flags;
  CLI::App app(
      "Compression ratio and encode/decode throughput of the chunk codec on "
      "synthetic training state",
      "hy_bench_codec");
  AddJsonFlag(&app, &flags.json);
  app.add_option("--size-mib", flags.size_mib, "Raw MiB per data set")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--chunk-kib", flags.chunk_kib, "Chunk size in KiB")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--format", flags.formats,
                 "Chunk format versions to run (default: 2 1)")
      ->check(CLI::IsMember({1, 2}));
  app.add_option("--reps", flags.reps, "Repetitions (the best counts)")
      ->capture_default_str()
      ->check(AtLeast(1));
  if (int code = ParseFlags(&app, argc, argv); code >= 0) return code;

  // Every data set has size_mib MiB of raw bytes.
  const size_t n32 = flags.size_mib * (1 << 20) / 4;  // f32 elements.
  const size_t n16 = 2 * n32;                         // bf16 elements.
  const float kLr = 1e-4f;
  const AdamState f32_state = SimulateAdam(n32, 8, kLr, 1);
  const AdamState bf16_state = SimulateAdam(n16, 8, kLr, 2);
  const auto f32_w = ToBytes(f32_state.w);
  const auto f32_prev = ToBytes(f32_state.w_prev);
  const auto adam_m = ToBytes(f32_state.m);
  const auto adam_v = ToBytes(f32_state.v);
  const auto bf16_w = ToBf16Bytes(bf16_state.w);
  const auto bf16_prev = ToBf16Bytes(bf16_state.w_prev);
  const auto bf16_w_sft = ToBf16Bytes(StepAgain(bf16_state, 1e-5f, 9));
  const auto bf16_w_rl = ToBf16Bytes(StepAgain(bf16_state, 1e-6f, 9));

  const int kNone = 0, kGroup = 1, kSplit = 2;
  std::vector<Case> cases = {
      {"f32-weights", "zstd", DType::kF32, &f32_w, nullptr, Opts(kNone)},
      {"f32-weights", "group+zstd", DType::kF32, &f32_w, nullptr, Opts(kGroup)},
      {"f32-weights", "split+zstd", DType::kF32, &f32_w, nullptr, Opts(kSplit)},
      {"bf16-weights", "zstd", DType::kBF16, &bf16_w, nullptr, Opts(kNone)},
      {"bf16-weights", "group+zstd", DType::kBF16, &bf16_w, nullptr,
       Opts(kGroup)},
      {"bf16-weights", "split+zstd", DType::kBF16, &bf16_w, nullptr,
       Opts(kSplit)},
      {"f32-adam-m", "zstd", DType::kF32, &adam_m, nullptr, Opts(kNone)},
      {"f32-adam-m", "split+zstd", DType::kF32, &adam_m, nullptr, Opts(kSplit)},
      {"f32-adam-v", "zstd", DType::kF32, &adam_v, nullptr, Opts(kNone)},
      {"f32-adam-v", "group+zstd", DType::kF32, &adam_v, nullptr, Opts(kGroup)},
      {"f32-adam-v", "split+zstd", DType::kF32, &adam_v, nullptr, Opts(kSplit)},
      {"f32-weights", "cast+split+zstd", DType::kF32, &f32_w, nullptr,
       Opts(kSplit, true)},
      {"bf16-delta-lr1e-4", "zstd", DType::kBF16, &bf16_w, nullptr,
       Opts(kNone)},
      {"bf16-delta-lr1e-4", "delta+group+zstd", DType::kBF16, &bf16_w,
       &bf16_prev, Opts(kGroup)},
      {"bf16-delta-lr1e-4", "delta+split+zstd", DType::kBF16, &bf16_w,
       &bf16_prev, Opts(kSplit)},
      {"bf16-delta-lr1e-5", "delta+group+zstd", DType::kBF16, &bf16_w_sft,
       &bf16_w, Opts(kGroup)},
      {"bf16-delta-lr1e-6", "delta+group+zstd", DType::kBF16, &bf16_w_rl,
       &bf16_w, Opts(kGroup)},
      {"f32-delta-lr1e-4", "delta+group+zstd", DType::kF32, &f32_w, &f32_prev,
       Opts(kGroup)},
      {"f32-delta-lr1e-4", "delta+split+zstd", DType::kF32, &f32_w, &f32_prev,
       Opts(kSplit)},

  };

  const size_t all = ThreadPool::DefaultThreadCount();
  if (!flags.json) {
    std::printf(
        "hy_bench_codec: %zu MiB per tensor, %zu KiB chunks, zstd-1, "
        "best of %d; MB/s of raw bytes\n\n",
        flags.size_mib, flags.chunk_kib, flags.reps);
    std::printf("| %-20s | %-21s | %7s | %7s | %11s | %11s | %s\n", "data",
                "mode", "threads", "ratio", "encode MB/s", "decode MB/s",
                "note");
    std::printf("|%s|%s|%s|%s|%s|%s|------|\n", std::string(22, '-').c_str(),
                std::string(23, '-').c_str(), std::string(9, '-').c_str(),
                std::string(9, '-').c_str(), std::string(13, '-').c_str(),
                std::string(13, '-').c_str());
  }
  for (size_t threads : {size_t{1}, all}) {
    for (const Case& c : cases) {
      for (int format : flags.formats) RunCase(flags, c, threads, format);
    }
    if (all == 1) break;
  }
  return 0;
}

}  // namespace
}  // namespace hy::bench

int main(int argc, char** argv) { return hy::bench::Main(argc, argv); }
