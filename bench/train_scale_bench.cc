// hy_bench_train_scale: the trainer's costs at the scale of a real model,
// in one process on this machine: a Qwen2-0.5B-shaped decoder (494M
// parameters, f32, random init), one forward + backward over a batch with
// every activation kept and with gradient checkpointing
// (trainer.gradient_checkpointing), and a checkpoint of one rank's part at
// --ranks ranks (its 1/N of the parameters and both Adam moments) through
// the store's SaveAsync (twice) and SaveBorrowed (read in place: the call,
// and how long the buffers stay the store's after it), beside a memcpy of
// the same bytes (the limit of a blocking copy) and torch.save of the same
// bytes right after the 2nd and the 3rd (Debian's python3-torch, when
// present; the disk here varies from run to run). Between saves the part
// takes an AdamW step; the 2nd and 3rd saves also go to a second store
// whose changed chunks may be XOR deltas against the previous version
// (StoreOptions::delta_max_chain). Each save's note gives the
// growth of peak RSS from its call to its commit (staging, encoded
// batches, RocksDB): the memory a checkpoint in flight adds.
//
//   hy_bench_train_scale [--json] [--model qwen2-0.5b|small] [--batch B]
//                        [--seq T] [--ranks N] [--dir DIR]
//
// First the trainer's FSDP step (FsdpModel + FsdpPass, forward, backward,
// gradient, Adam) at world 1 over a real one-rank Gloo group, over the
// whole flat buffer and a decoder layer at a time (trainer.fsdp_per_layer).
// Peak memory is the growth of this process's peak RSS (VmHWM, reset
// through /proc/self/clear_refs) over its RSS before the step. A multi-rank
// GRPO job with a lost node is hyctl train's (see the issue note), not
// this binary's.

#include <ATen/core/grad_mode.h>
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "hy/common/process_memory.h"
#include "hy/statestore/store.h"
#include "hy/trainer/config/model_config.h"
#include "hy/trainer/model/model.h"
#include "hy/trainer/model/vocab_matrix.h"
#include "train_scale_fsdp.h"

namespace hy::bench {
namespace {

using trainer::ModelConfig;
using trainer::ModelRole;
using Clock = std::chrono::steady_clock;

double Seconds(const std::function<void()>& fn) {
  const auto start = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Flags {
  bool json = false;
  std::string model = "qwen2-0.5b";
  int64_t batch = 2;
  int64_t seq = 128;
  int ranks = 4;
  std::string dir = "/tmp";
};

void Row(const Flags& f, const std::string& what, double seconds, double mb,
         const std::string& note) {
  if (f.json) {
    std::printf(
        "{\"row\":\"%s\",\"seconds\":%.3f,\"mb\":%.1f,\"note\":\"%s\"}\n",
        what.c_str(), seconds, mb, note.c_str());
  } else {
    std::printf("| %-38s | %9.3f | %9.1f | %s\n", what.c_str(), seconds, mb,
                note.c_str());
  }
  std::fflush(stdout);
}

ModelConfig Config(const std::string& name) {
  ModelConfig c;
  c.architecture = std::string(trainer::kQwen2Arch);
  if (name == "qwen2-0.5b") {  // Qwen/Qwen2-0.5B's config.json.
    c.vocab_size = 151936;
    c.hidden_size = 896;
    c.intermediate_size = 4864;
    c.num_layers = 24;
    c.num_heads = 14;
    c.num_kv_heads = 2;
    c.rope_theta = 1000000.0;
    c.max_position_embeddings = 32768;
    c.tie_word_embeddings = true;
  } else {  // small: for a quick look.
    c.vocab_size = 4096;
    c.hidden_size = 256;
    c.intermediate_size = 768;
    c.num_layers = 4;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.max_position_embeddings = 1024;
  }
  c.attention_bias = true;
  return c;
}

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app(
      "The trainer's costs at the scale of a real model, in one process",
      "hy_bench_train_scale");
  AddJsonFlag(&app, &f.json);
  app.add_option("--model", f.model, "The decoder's shape")
      ->capture_default_str()
      ->check(CLI::IsMember({"qwen2-0.5b", "small"}));
  app.add_option("--batch", f.batch, "Sequences per batch")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--seq", f.seq, "Tokens per sequence")
      ->capture_default_str()
      ->check(AtLeast(2));
  app.add_option("--ranks", f.ranks, "Ranks the checkpoint is split over")
      ->capture_default_str()
      ->check(AtLeast(1));
  app.add_option("--dir", f.dir, "Where the checkpoints go")
      ->capture_default_str();
  if (int code = ParseFlags(&app, argc, argv); code >= 0) return code;
  // Blocks of 1 MiB and up are mapped and unmapped on their own, so the
  // second step's peak is not hidden in memory the first one freed.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  const ModelConfig config = Config(f.model);
  Status valid = trainer::ValidateModelConfig(config);
  if (!valid.ok()) {
    std::fprintf(stderr, "hy_bench_train_scale: %s\n",
                 valid.ToString().c_str());
    return 1;
  }
  if (!f.json) {
    std::printf(
        "hy_bench_train_scale: %s, batch %lld x %lld tokens, part of 1 rank "
        "of %d\n\n",
        f.model.c_str(), static_cast<long long>(f.batch),
        static_cast<long long>(f.seq), f.ranks);
    std::printf("| %-38s | %9s | %9s | %s\n", "what", "seconds", "MB", "note");
    std::printf(
        "|----------------------------------------|-----------|-----"
        "------|------\n");
  }
  // The trainer's FSDP step at world 1, whole and by layer (first, while
  // nothing else of this bench is resident).
  {
    Result<FsdpStepResult> r = MeasureFsdpStep(config, f.batch, f.seq);
    if (!r.ok()) {
      std::fprintf(stderr, "hy_bench_train_scale: %s\n",
                   r.status().ToString().c_str());
      return 1;
    }
    const double whole = r->rows[1].peak_growth_mb;
    for (const FsdpStepRow& row : r->rows) {
      char note[200];
      std::snprintf(
          note, sizeof(note),
          "peak RSS growth over the state (%.0f MB); peak / (state + 2 "
          "layers) %.2f%s",
          r->state_mb,
          (r->state_mb + row.peak_growth_mb) / (r->state_mb + 2 * r->layer_mb),
          row.by_layer ? "" : "; gathers the whole model and its gradient");
      Row(f,
          row.by_layer ? "FSDP step (1 rank), by layer"
                       : "FSDP step (1 rank), whole model",
          row.seconds, row.peak_growth_mb, note);
    }
    char note[160];
    std::snprintf(note, sizeof(note),
                  "by layer / whole growth %.2f; root unit %.0f MB, one "
                  "layer %.0f MB (f32)",
                  r->rows[0].peak_growth_mb / whole, r->root_mb, r->layer_mb);
    Row(f, "FSDP by layer vs whole", 0, r->rows[0].peak_growth_mb - whole,
        note);
  }
  malloc_trim(0);
  const auto metas = trainer::ModelTensors(config, ModelRole::kActor);
  int64_t numel = 0;
  for (const auto& m : metas) numel += m.NumElements().value();
  at::manual_seed(1);
  at::Tensor flat = at::randn({numel}) * 0.02;  // The gathered parameters.
  if (!f.json) {
    std::printf("(%.0fM parameters, %.0f MB f32)\n", numel / 1e6,
                numel * 4 / 1e6);
  }
  // As the trainer does (FsdpModel::TrackGradient): leaves on the flat
  // buffer whose gradients accumulate in place into one flat gradient.
  flat.mutable_grad() = at::zeros_like(flat);
  std::map<std::string, at::Tensor> views;
  int64_t at = 0;
  for (const auto& m : metas) {
    const int64_t n = m.NumElements().value();
    views[m.name] =
        flat.detach().narrow(0, at, n).view(m.shape).requires_grad_(true);
    views[m.name].mutable_grad() = flat.grad().narrow(0, at, n).view(m.shape);
    at += n;
  }
  trainer::Weights w =
      trainer::BindWeights(config, ModelRole::kActor,
                           [&](const std::string& n) { return views[n]; })
          .value();
  // As FsdpPass does: the vocabulary matrices a chunk of rows at a time,
  // their gradient straight into the flat gradient.
  auto vocab = [&](const std::string& name) {
    return std::make_unique<trainer::WholeVocab>(views[name].detach(),
                                                 views[name].grad(), 0);
  };
  auto embed = vocab("model.embed_tokens.weight");
  auto head = config.tie_word_embeddings ? nullptr : vocab("lm_head.weight");
  w.embed_rows = embed.get();
  w.head_rows = head != nullptr ? head.get() : embed.get();
  at::Tensor tokens =
      at::randint(config.vocab_size, {f.batch, f.seq}, at::kLong);
  at::Tensor positions = at::arange(f.seq, at::kLong).repeat({f.batch, 1});
  at::Tensor valid_keys = at::ones({f.batch, f.seq}, at::kBool);

  // One forward + backward of a next-token loss, with and without
  // gradient checkpointing.
  double kept_mb = 0;
  for (bool recompute : {false, true}) {
    flat.mutable_grad().zero_();
    malloc_trim(0);  // What the last step freed goes back to the system.
    const int64_t before = ResidentBytes();
    ResetPeakResident();
    const double s = Seconds([&] {
      at::Tensor h = trainer::Trunk(config, w, tokens, positions, valid_keys,
                                    trainer::TpContext{}, nullptr, recompute)
                         .value();
      at::Tensor logits =
          trainer::LmHead(w, h.narrow(1, 0, f.seq - 1), trainer::TpContext{})
              .value();
      at::Tensor loss =
          at::cross_entropy_loss(logits.reshape({-1, config.vocab_size}),
                                 tokens.narrow(1, 1, f.seq - 1).reshape({-1}));
      loss.backward();
    });
    const double mb = (PeakResidentBytes() - before) / 1e6;
    char note[96];
    if (!recompute) {
      kept_mb = mb;
      std::snprintf(note, sizeof(note), "peak RSS growth");
    } else {
      std::snprintf(note, sizeof(note), "peak RSS growth, %.2fx kept",
                    mb / kept_mb);
    }
    Row(f,
        recompute ? "fwd+bwd, gradient checkpointing"
                  : "fwd+bwd, activations kept",
        s, mb, note);
  }

  // One rank's part: its 1/N of the parameters and of both moments.
  const int64_t piece = (numel + f.ranks - 1) / f.ranks;
  at::Tensor grad = flat.grad().narrow(0, 0, std::min(piece, numel));
  std::vector<at::Tensor> part = {
      flat.detach().narrow(0, 0, grad.numel()).contiguous(),
      (grad * 0.1).contiguous(), (grad * grad * 1e-3).contiguous()};
  const char* names[] = {"actor/params", "actor/exp_avg", "actor/exp_avg_sq"};
  int64_t part_bytes = 0;
  for (const auto& t : part) part_bytes += t.numel() * 4;
  std::vector<uint8_t> copy(part_bytes);
  double memcpy_s = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    memcpy_s = std::min(memcpy_s, Seconds([&] {
                          int64_t off = 0;
                          for (const auto& t : part) {
                            std::memcpy(copy.data() + off, t.data_ptr(),
                                        t.numel() * 4);
                            off += t.numel() * 4;
                          }
                        }));
  }
  Row(f, "memcpy of the rank's part (limit)", memcpy_s, part_bytes / 1e6, "");

  std::string tmpl = f.dir + "/hy-bench-train-scale-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "hy_bench_train_scale: cannot create %s: %s\n",
                 tmpl.c_str(), std::strerror(errno));
    return 1;
  }
  // Two stores side by side: chunks whole, and chunks that may be XOR
  // deltas against the previous version (StoreOptions::delta_max_chain).
  std::unique_ptr<statestore::Store> stores[2];
  for (int d = 0; d < 2; ++d) {
    statestore::StoreOptions o;
    o.staging_bytes = std::max<uint64_t>(o.staging_bytes, part_bytes);
    o.delta_max_chain = d == 0 ? 0 : 4;
    auto store =
        statestore::Store::Open(tmpl + (d == 0 ? "/store" : "/store-delta"), o);
    if (!store.ok()) {
      std::fprintf(stderr, "hy_bench_train_scale: %s\n",
                   store.status().ToString().c_str());
      return 1;
    }
    stores[d] = std::move(store).value();
  }
  const float grad_std = part[1].std().item<float>() * 10;
  auto make_part = [&](uint64_t v) {
    statestore::SavePart p;
    p.version = v;
    for (size_t t = 0; t < part.size(); ++t) {
      statestore::ShardData sd;
      sd.meta = TensorMeta{names[t], DType::kF32, {part[t].numel()}};
      sd.geometry = ShardGeometry::WholeTensor(sd.meta.shape);
      sd.data = ConstBytes(static_cast<const uint8_t*>(part[t].data_ptr()),
                           part[t].numel() * 4);
      p.shards.push_back(sd);
    }
    return p;
  };
  // torch.save of the part's current bytes, durable (fsync), in seconds;
  // 0 where python3-torch is missing.
  const std::string raw = tmpl + "/part.bin";
  const std::string script_path = tmpl + "/save.py";
  std::ofstream(script_path)
      << "import os,sys,time,torch\n"
         "t=torch.from_file(sys.argv[1],size=int(sys.argv[2]),"
         "dtype=torch.float32)\n"
         "s=time.time()\n"
         "f=open(sys.argv[3],'wb'); torch.save(t,f); f.flush(); "
         "os.fsync(f.fileno()); f.close()\n"
         "print(time.time()-s)\n";
  auto torch_save = [&]() {
    {
      int64_t off = 0;
      for (const auto& t : part) {
        std::memcpy(copy.data() + off, t.data_ptr(), t.numel() * 4);
        off += t.numel() * 4;
      }
      // The bytes torch.save reads, synced first: their writeback would
      // otherwise share the disk with the timed torch.save, or with the
      // next hy save.
      const int fd = open(raw.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
      for (int64_t off = 0; fd >= 0 && off < part_bytes;) {
        const ssize_t w = write(fd, copy.data() + off, part_bytes - off);
        if (w <= 0) break;
        off += w;
      }
      if (fd >= 0) {
        fsync(fd);
        close(fd);
      }
    }
    const std::string cmd = "/usr/bin/python3 " + script_path + " " + raw +
                            " " + std::to_string(part_bytes / 4) + " " + tmpl +
                            "/torch.pt 2>/dev/null";
    double seconds = 0;
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe != nullptr) {
      if (std::fscanf(pipe, "%lf", &seconds) != 1) seconds = 0;
      pclose(pipe);
    }
    std::filesystem::remove(tmpl + "/torch.pt");
    return seconds;
  };
  double durable_s[2] = {0, 0};
  // 1, 2: SaveAsync (copied into staging); 3: SaveBorrowed (read in place,
  // as the trainer's checkpoint.read_in_place does between two optimizer
  // steps).
  for (uint64_t v = 1; v <= 3; ++v) {
    if (v >= 2) {
      // One AdamW step later (lr 1e-6, as RL fine-tuning uses, betas 0.9
      // and 0.999) on a fresh gradient of the same scale: the parameters
      // and the second moment move by about 1e-4 of their values, the
      // first moment by about 10%; every f32 value changes.
      at::NoGradGuard no_grad;
      at::Tensor g = at::randn_like(part[1]) * grad_std;
      part[1].mul_(0.9).add_(g, 0.1);
      part[2].mul_(0.999).addcmul_(g, g, 0.001);
      part[0].addcdiv_(part[1], part[2].sqrt().add_(1e-8), -1e-6);
    }
    for (int d = 0; d < 2; ++d) {
      if (v == 1 && d == 1) continue;  // No base yet: the same as d == 0.
      statestore::Store* store = stores[d].get();
      statestore::SavePart p = make_part(v);
      std::unique_ptr<statestore::SaveHandle> h;
      malloc_trim(0);
      const int64_t before = ResidentBytes();
      ResetPeakResident();
      const double blocking = Seconds([&] {
        h = std::move(v == 3 ? store->SaveBorrowed(std::move(p))
                             : store->SaveAsync(std::move(p)))
                .value();
      });
      // How long the buffers stay the store's after the call: an update
      // that comes sooner waits for the rest.
      const double held = Seconds([&] { h->WaitRead(); });
      statestore::SaveStats stats;
      const double rest = Seconds([&] {
        Status s = h->Wait(&stats);
        statestore::CommitRecord c;
        c.version = v;
        c.step = v;
        if (s.ok()) s = store->Commit(c);
        if (!s.ok()) std::fprintf(stderr, "save: %s\n", s.ToString().c_str());
      });
      const double durable = blocking + held + rest;
      const double peak_mb = (PeakResidentBytes() - before) / 1e6;
      durable_s[d] = durable;
      char note[200];
      std::snprintf(note, sizeof(note),
                    "%.2fx memcpy; buffers held %.2f s more; durable %.2f s "
                    "(%.0f MB/s), %.0f MB written; peak RSS +%.0f MB",
                    blocking / memcpy_s, held, durable,
                    part_bytes / 1e6 / durable, stats.new_bytes / 1e6, peak_mb);
      const char* what[2][4] = {{"", "SaveAsync blocking, 1st checkpoint",
                                 "SaveAsync blocking, 2nd checkpoint",
                                 "SaveBorrowed call (read in place), 3rd"},
                                {"", "", "SaveAsync 2nd, XOR delta (chain 4)",
                                 "SaveBorrowed 3rd, XOR delta (chain 4)"}};
      Row(f, what[d][v], blocking, part_bytes / 1e6, note);
    }
    // torch.save of the same bytes right after, so that each pair sees
    // the disk in the same mood.
    const double torch_s = v >= 2 ? torch_save() : 0;
    if (torch_s > 0) {
      char note[128];
      std::snprintf(note, sizeof(note),
                    "%.0f MB/s; hy's durable throughput above / torch.save: "
                    "%.2fx, with XOR delta %.2fx",
                    part_bytes / 1e6 / torch_s, torch_s / durable_s[0],
                    torch_s / durable_s[1]);
      Row(f,
          v == 2 ? "torch.save of the 2nd (fsync)"
                 : "torch.save of the 3rd (fsync)",
          torch_s, part_bytes / 1e6, note);
    }
    if (v == 1) {  // The delta store's base, untimed (and its staging).
      statestore::SaveStats stats;
      auto h = stores[1]->SaveAsync(make_part(1));
      Status s = h.ok() ? (*h)->Wait(&stats) : h.status();
      statestore::CommitRecord c;
      c.version = 1;
      c.step = 1;
      if (s.ok()) s = stores[1]->Commit(c);
      if (!s.ok()) std::fprintf(stderr, "save: %s\n", s.ToString().c_str());
    }
  }

  for (auto& store : stores) store.reset();
  std::filesystem::remove_all(tmpl);
  return 0;
}

}  // namespace
}  // namespace hy::bench

int main(int argc, char** argv) { return hy::bench::Main(argc, argv); }
