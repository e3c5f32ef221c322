// hy_trainer_test_worker: one rank of a trainer test job, started by
// trainer_dist_test.cc with torchrun's environment (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT). Scenarios:
//
//   fsdp_step OUT [whole|layer [ROWS [wide|tied]]]
//                    one SFT-loss Adam step on a fixed batch (its first
//                    ROWS rows, default 6) under FSDP over the world, over
//                    the whole flat buffer or a decoder layer at a time;
//                    rank 0 writes the updated flat parameters (f32) to OUT.
//   tp_forward       the actor's forward under TP (world == tp) with bf16
//                    shards equals the whole forward on the same bf16
//                    weights (to f32 rounding) and the f32 forward (to bf16
//                    tolerance); checks itself.
//   run CONFIG OUT [--resume] [--max N]
//                    RunWorker with the YAML config; every rank appends one
//                    line per iteration to OUT.<rank> with the report's
//                    training figures printed exactly (%.17g).
//
// Exit status 0 on success; 1 with a message on stderr otherwise.

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cpu_threads.h"
#include "hy/reshard/layout.h"
#include "hy/reshard/shard_map.h"
#include "hy/trainer/config/config.h"
#include "hy/trainer/data/task.h"
#include "hy/trainer/model/comm.h"
#include "hy/trainer/model/fsdp.h"
#include "hy/trainer/model/fsdp_pass.h"
#include "hy/trainer/model/fsdp_unit.h"
#include "hy/trainer/model/model.h"
#include "hy/trainer/ppo/worker.h"
#include "ppo.h"

namespace hy::trainer {
namespace {

int Fail(const std::string& what) {
  std::cerr << "worker: " << what << "\n";
  return 1;
}

ModelConfig SmallModel() {
  ModelConfig m;
  m.hidden_size = 64;
  m.intermediate_size = 96;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.num_layers = 2;
  return m;
}

// A fixed batch: 6 SFT sequences [6, L] with their validity.
void FixedBatch(at::Tensor* tokens, at::Tensor* valid) {
  TaskConfig task;
  std::vector<std::vector<int>> seqs;
  int64_t len = 0;
  for (int i = 0; i < 6; ++i) {
    seqs.push_back(SftSequence(Generate(task, 7, 0, i)));
    len = std::max<int64_t>(len, seqs.back().size());
  }
  *tokens = at::full({6, len}, kPad, at::kLong);
  *valid = at::zeros({6, len}, at::kBool);
  for (int i = 0; i < 6; ++i) {
    for (size_t j = 0; j < seqs[i].size(); ++j) {
      (*tokens)[i][j] = seqs[i][j];
      (*valid)[i][j] = true;
    }
  }
}

// `by_layer`: FSDP a decoder layer at a time (FsdpPass over FsdpUnits),
// else the whole flat buffer. Only the first `rows` rows of the batch are
// used, so with more ranks than rows some ranks have none (Idle). `shape`
// "wide": a model whose root unit is most of it (see below); "tied": the
// head is the embedding.
int FsdpStep(const std::string& out_path, bool by_layer, int64_t rows,
             const std::string& shape, const std::string& how) {
  const bool wide = shape == "wide";
  CommOptions co;
  co.timeout_ms = 60000;
  co.equal_size_collectives = how == "equal";
  if (how == "cuda") co.device = Device::kCuda;
  auto comm = Comm::FromEnv(co);
  if (!comm.ok()) return Fail(comm.status().ToString());
  Comm* c = comm.value().get();
  ModelConfig config = SmallModel();
  config.num_layers = 3;
  if (wide) {
    // Untied 1000-row vocabulary, one layer: the embedding and head are
    // most of the model, so on 3 ranks the middle piece holds the
    // embedding's end and the head's start (two runs of the root unit).
    config.num_layers = 1;
    config.vocab_size = 1000;
    config.tie_word_embeddings = false;
  }
  config.tie_word_embeddings = shape == "tied";
  auto model = FsdpModel::Create(config, ModelRole::kActor, c->rank(),
                                 c->world_size(), true, c->device());
  if (!model.ok()) return Fail(model.status().ToString());
  FsdpModel* m = model.value().get();
  m->InitFromSeed(3);
  // Gradient reduction in windows of 100 elements: many rounds per unit.
  FsdpUnits units(m, 100);
  at::Tensor tokens, valid;
  FixedBatch(&tokens, &valid);
  rows = std::min<int64_t>(rows, tokens.size(0));
  tokens = tokens.narrow(0, 0, rows);
  valid = valid.narrow(0, 0, rows);
  const int64_t len = tokens.size(1);
  const double count = valid.narrow(1, 1, len - 1).sum().item<double>();
  const int64_t lo = rows * c->rank() / c->world_size();
  const int64_t hi = rows * (c->rank() + 1) / c->world_size();
  // The vocabulary matrices a few rows at a time: many chunks, and looked-up
  // rows in most of them (a tied matrix keeps those rows' gradient back).
  auto pass =
      FsdpPass::Begin(m, by_layer ? &units : nullptr, c, true, wide ? 64 : 5);
  if (!pass.ok()) return Fail(pass.status().ToString());
  FsdpPass* p = pass.value().get();
  if (hi > lo) {
    auto w = p->Bind();
    if (!w.ok()) return Fail(w.status().ToString());
    at::Tensor t = tokens.narrow(0, lo, hi - lo);
    at::Tensor v = valid.narrow(0, lo, hi - lo);
    at::Tensor pos = (v.to(at::kLong).cumsum(1) - 1).clamp_min(0);
    auto hidden = Trunk(m->config(), w.value(), t, pos, v, TpContext{}, nullptr,
                        false, p->runner());
    if (!hidden.ok()) return Fail(hidden.status().ToString());
    auto logits =
        LmHead(w.value(), hidden.value().narrow(1, 0, len - 1), TpContext{});
    at::Tensor logp =
        TokenLogProbs(logits.value(), t.narrow(1, 1, len - 1), 1.0, nullptr);
    at::Tensor loss =
        -(logp * v.narrow(1, 1, len - 1).to(logp.device(), at::kFloat)).sum() /
        count;
    Status s = p->Backward(loss);
    if (!s.ok()) return Fail(s.ToString());
  } else {
    Status s = p->Idle();
    if (!s.ok()) return Fail(s.ToString());
  }
  auto piece = p->GradientPiece();
  if (!piece.ok()) return Fail(piece.status().ToString());
  OptimConfig optim;
  optim.lr = 1e-2;
  // Adam's first step is lr * g / (|g| + eps): with the default eps an
  // element whose gradient is ~1e-9 (rounding noise) moves by a full lr in
  // a direction set by that noise. A larger eps keeps the step a smooth
  // function of the gradient, so the comparison measures the sharding.
  optim.eps = 1e-4;
  m->AdamStep(piece.value(), optim, 1.0);
  at::Tensor full;
  if (!m->Gather(c, &full).ok()) return Fail("gather after step");
  if (c->rank() == 0) {
    full = full.cpu();
    std::ofstream out(out_path, std::ios::binary);
    out.write(static_cast<const char*>(full.data_ptr()), full.numel() * 4);
  }
  return 0;
}

int TpForward() {
  CommOptions co;
  co.tp_size = std::atoi(std::getenv("WORLD_SIZE"));
  co.timeout_ms = 60000;
  auto comm = Comm::FromEnv(co);
  if (!comm.ok()) return Fail(comm.status().ToString());
  Comm* c = comm.value().get();
  const ModelConfig config = SmallModel();
  const auto metas = ModelTensors(config, ModelRole::kActor);
  auto spec = reshard::ModelSpec::Build(metas, reshard::ModelRules::Default());
  auto layout = reshard::Layout::Make(c->world_size(), 1, 1, 1);
  auto map = reshard::ShardMap::Build(layout.value(), spec.value());
  if (!map.ok()) return Fail(map.status().ToString());
  std::map<std::string, at::Tensor> f32, bf16_full, shards;
  for (size_t t = 0; t < metas.size(); ++t) {
    const auto& meta = metas[t];
    at::Tensor w = InitTensor(5, meta.name, meta.shape);
    if (meta.name.find("norm") != std::string::npos) {
      w = w + 0.1 * InitTensor(6, meta.name + "x", {meta.shape[0], 1}).view(-1);
    }
    f32[meta.name] = w;
    bf16_full[meta.name] = w.to(at::kBFloat16);
    const Box& box = map.value().Get(c->rank(), t).geometry.box();
    at::Tensor s = bf16_full[meta.name];
    for (size_t d = 0; d < box.sizes.size(); ++d) {
      s = s.narrow(d, box.offsets[d], box.sizes[d]);
    }
    shards[meta.name] = s.contiguous();
  }
  auto bind = [&](std::map<std::string, at::Tensor>& m) {
    return BindWeights(config, ModelRole::kActor,
                       [&m](const std::string& n) { return m[n]; })
        .value();
  };
  at::Tensor tokens, valid;
  FixedBatch(&tokens, &valid);
  at::Tensor pos = (valid.to(at::kLong).cumsum(1) - 1).clamp_min(0);
  at::NoGradGuard no_grad;
  TpContext tp{c->world_size(), c->rank(), c};
  Weights ws = bind(shards);
  auto h_tp = Trunk(config, ws, tokens, pos, valid, tp, nullptr);
  if (!h_tp.ok()) return Fail(h_tp.status().ToString());
  at::Tensor l_tp = LmHead(ws, h_tp.value(), tp).value();
  Weights wb = bind(bf16_full);
  at::Tensor l_bf =
      LmHead(
          wb,
          Trunk(config, wb, tokens, pos, valid, TpContext{}, nullptr).value(),
          TpContext{})
          .value();
  Weights wf = bind(f32);
  at::Tensor l_f =
      LmHead(
          wf,
          Trunk(config, wf, tokens, pos, valid, TpContext{}, nullptr).value(),
          TpContext{})
          .value();
  at::Tensor m = valid.unsqueeze(-1).to(at::kFloat);
  const double same_weights = ((l_tp - l_bf) * m).abs().max().item<double>();
  const double vs_f32 = ((l_tp - l_f) * m).abs().max().item<double>();
  const double scale = (l_f * m).abs().max().item<double>();
  std::cerr << "tp_forward rank " << c->rank() << ": max |tp - whole bf16| "
            << same_weights << ", max |tp - whole f32| " << vs_f32
            << ", max |logit| " << scale << "\n";
  if (!(same_weights <= 1e-5 * std::max(1.0, scale))) {
    return Fail(
        "TP forward differs from the whole forward on the same weights");
  }
  if (!(vs_f32 <= 2e-2 * std::max(1.0, scale))) {
    return Fail(
        "TP bf16 forward differs from the f32 forward beyond bf16 tolerance");
  }
  return 0;
}

int Run(int argc, char** argv) {
  if (argc < 4) return Fail("usage: run CONFIG OUT [--resume] [--max N]");
  std::ifstream in(argv[2]);
  std::stringstream text;
  text << in.rdbuf();
  auto config = ParseConfigYaml(text.str());
  if (!config.ok()) return Fail(config.status().ToString());
  WorkerOptions options;
  for (int i = 4; i < argc; ++i) {
    if (std::strcmp(argv[i], "--resume") == 0) options.resume = true;
    if (std::strcmp(argv[i], "--max") == 0 && i + 1 < argc) {
      options.max_iterations = std::atoll(argv[++i]);
    }
  }
  const std::string out_path = std::string(argv[3]) + "." + std::getenv("RANK");
  std::ofstream out(out_path, std::ios::app);
  options.on_iteration = [&out](const IterationReport& r) {
    char line[512];
    std::snprintf(line, sizeof(line),
                  "%lld %.17g %.17g %.17g %.17g %.17g %.17g %.17g %.17g %.17g "
                  "%.17g\n",
                  static_cast<long long>(r.iteration), r.reward_mean,
                  r.exact_match, r.kl, r.kl_coef, r.policy_loss, r.value_loss,
                  r.entropy, r.clip_frac, r.grad_norm, r.response_length);
    out << line << std::flush;
  };
  options.log = [](const std::string& l) { std::cerr << l << "\n"; };
  auto summary = RunWorker(config.value(), options);
  if (!summary.ok()) return Fail(summary.status().ToString());
  return 0;
}

}  // namespace
}  // namespace hy::trainer

int main(int argc, char** argv) {
  hy::trainer::UseOneCpuThread();
  if (argc < 2) return hy::trainer::Fail("usage: SCENARIO ...");
  const std::string scenario = argv[1];
  if (scenario == "fsdp_step" && argc >= 3) {
    return hy::trainer::FsdpStep(argv[2],
                                 argc >= 4 && std::string(argv[3]) == "layer",
                                 argc >= 5 ? std::atoll(argv[4]) : 6,
                                 argc >= 6 ? std::string(argv[5]) : "",
                                 argc >= 7 ? std::string(argv[6]) : "");
  }
  if (scenario == "tp_forward") return hy::trainer::TpForward();
  if (scenario == "run") return hy::trainer::Run(argc, argv);
  return hy::trainer::Fail("unknown scenario " + scenario);
}
