// Executor scenarios over real Gloo: every rank builds the same global
// tensors from a seed, runs its part of a reshard and checks bitwise that
// each destination shard is the slice of the global tensors its layout
// (ShardMap geometry runs) says.

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/bf16.h"
#include "hy/reshard/c10d_transport.h"
#include "hy/reshard/executor.h"
#include "hy/reshard/plan.h"
#include "worker.h"

namespace hy::reshard::testing {
namespace {

using Buffers = std::vector<std::vector<uint8_t>>;

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

TensorSpec Tensor(const std::string& name, DType dtype,
                  std::vector<int64_t> shape, int tp_dim, StageRule stage) {
  TensorSpec t;
  t.meta = TensorMeta{name, dtype, std::move(shape)};
  t.tp_dim = tp_dim;
  t.stage = stage;
  return t;
}

// A small Llama: vocab-parallel embedding, column-parallel q/k/v/gate/up,
// row-parallel o/down, replicated norms, an lm_head, and two odd tensors
// (7 floats, 3 int32) that make the FSDP pieces uneven and travel raw.
ModelSpec TestSpec() {
  const int64_t hidden = 128, inter = 256, vocab = 256;
  const StageRule first{StageRule::Kind::kFirst, 0};
  const StageRule last{StageRule::Kind::kLast, 0};
  const StageRule all{StageRule::Kind::kAll, 0};
  ModelSpec spec;
  auto add = [&](TensorSpec t) { spec.tensors.push_back(std::move(t)); };
  add(Tensor("model.embed_tokens.weight", DType::kF32, {vocab, hidden}, 0,
             first));
  for (int l = 0; l < 2; ++l) {
    const StageRule layer{StageRule::Kind::kLayer, l};
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : {"q", "k", "v"}) {
      add(Tensor(p + "self_attn." + n + "_proj.weight", DType::kF32,
                 {hidden, hidden}, 0, layer));
    }
    add(Tensor(p + "self_attn.o_proj.weight", DType::kF32, {hidden, hidden}, 1,
               layer));
    add(Tensor(p + "mlp.gate_proj.weight", DType::kF32, {inter, hidden}, 0,
               layer));
    add(Tensor(p + "mlp.up_proj.weight", DType::kF32, {inter, hidden}, 0,
               layer));
    add(Tensor(p + "mlp.down_proj.weight", DType::kF32, {hidden, inter}, 1,
               layer));
    add(Tensor(p + "input_layernorm.weight", DType::kF32, {hidden}, -1, layer));
    add(Tensor(p + "post_attention_layernorm.weight", DType::kF32, {hidden}, -1,
               layer));
  }
  add(Tensor("model.extra.scale", DType::kF32, {7}, -1, all));
  add(Tensor("model.norm.weight", DType::kF32, {hidden}, -1, last));
  add(Tensor("lm_head.weight", DType::kF32, {vocab, hidden}, 0, last));
  add(Tensor("train.step", DType::kI32, {3}, -1, all));
  return spec;
}

// The global tensors, identical in every process.
struct Model {
  ModelSpec spec;
  Buffers global;  // Row-major bytes of each tensor in its dtype.

  explicit Model(ModelSpec s, uint64_t seed) : spec(std::move(s)) {
    for (size_t t = 0; t < spec.tensors.size(); ++t) {
      const int64_t n = *spec.tensors[t].meta.NumElements();
      std::vector<uint8_t> bytes(n * DTypeSize(spec.tensors[t].meta.dtype));
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t h = Mix(seed ^ (t << 40) ^ i);
        if (spec.tensors[t].meta.dtype == DType::kF32) {
          // Uniform in [-1, 1): normal numbers, far from Inf.
          float f = static_cast<float>(h >> 40) / (1 << 23) - 1.0f;
          std::memcpy(&bytes[i * 4], &f, 4);
        } else {
          uint32_t v = static_cast<uint32_t>(h);
          std::memcpy(&bytes[i * 4], &v, 4);
        }
      }
      global.push_back(std::move(bytes));
    }
  }

  // Raises `fraction` of the f32 values by one bf16 ulp (so exactly those
  // change in bf16 too), chosen by a hash of (round, tensor, index).
  void Change(int round, double fraction) {
    const uint64_t limit = static_cast<uint64_t>(fraction * 1000000);
    for (size_t t = 0; t < spec.tensors.size(); ++t) {
      if (spec.tensors[t].meta.dtype != DType::kF32) continue;
      const size_t n = global[t].size() / 4;
      for (size_t i = 0; i < n; ++i) {
        if (Mix((uint64_t{0xC0FFEE} + round) ^ (t << 40) ^ i) % 1000000 >=
            limit) {
          continue;
        }
        uint32_t bits;
        std::memcpy(&bits, &global[t][i * 4], 4);
        bits += 0x10000;
        std::memcpy(&global[t][i * 4], &bits, 4);
      }
    }
  }

  // Rank `rank`'s shard of every tensor under `map`, in the wire dtype.
  Buffers Shards(const ShardMap& map, int rank, WireFormat wire) const {
    Buffers out(spec.tensors.size());
    for (size_t t = 0; t < spec.tensors.size(); ++t) {
      const RankShard& shard = map.Get(rank, static_cast<int>(t));
      if (!shard.has_shard) continue;
      const DType dtype = spec.tensors[t].meta.dtype;
      const bool narrow = WireDType(dtype, wire) != dtype;
      const size_t es = DTypeSize(dtype);
      for (const FlatRun& run : shard.runs) {
        const uint8_t* from = global[t].data() + run.offset * es;
        if (!narrow) {
          out[t].insert(out[t].end(), from, from + run.length * es);
          continue;
        }
        const size_t at = out[t].size();
        out[t].resize(at + run.length * 2);
        CastF32ToBf16(from, out[t].data() + at, run.length);
      }
    }
    return out;
  }
};

std::vector<ConstBytes> ConstViews(const Buffers& b) {
  std::vector<ConstBytes> v;
  for (const auto& x : b) v.emplace_back(x.data(), x.size());
  return v;
}

std::vector<MutableBytes> MutableViews(Buffers& b) {
  std::vector<MutableBytes> v;
  for (auto& x : b) v.emplace_back(x.data(), x.size());
  return v;
}

Buffers ZerosLike(const Buffers& b) {
  Buffers z;
  for (const auto& x : b) z.emplace_back(x.size(), 0);
  return z;
}

Status CheckShards(const ModelSpec& spec, const Buffers& got,
                   const Buffers& want, const std::string& what) {
  for (size_t t = 0; t < want.size(); ++t) {
    if (got[t] != want[t]) {
      return Status::Internal(what + ": tensor " + spec.tensors[t].meta.name +
                              " differs from its slice of the global tensor");
    }
  }
  return Status::OK();
}

// The sum of `value` over all ranks.
Result<int64_t> SumOverRanks(Transport* t, int64_t value) {
  std::vector<std::vector<uint8_t>> all;
  HY_RETURN_IF_ERROR(t->AllGatherV(ConstBytes(&value, sizeof(value)), &all));
  int64_t sum = 0;
  for (const auto& v : all) {
    int64_t x = 0;
    if (v.size() != sizeof(x)) return Status::Internal("SumOverRanks: size");
    std::memcpy(&x, v.data(), sizeof(x));
    sum += x;
  }
  return sum;
}

ExecutorOptions Options(WireFormat wire, bool sparse_delta) {
  ExecutorOptions options;
  options.wire = wire;
  options.sparse_delta = sparse_delta;
  return options;
}

Result<std::unique_ptr<C10dTransport>> ConnectToTestStore(
    const WorkerArgs& args) {
  C10dTransportOptions options;
  options.timeout_ms = args.timeout_ms;
  options.prefix = "test/" + args.scenario;
  options.rank0_hosts_store = false;
  options.gloo_hostname = "127.0.0.1";
  return C10dTransport::Connect(args.rank, args.world, "127.0.0.1", args.port,
                                options);
}

Result<std::shared_ptr<const TransferPlan>> MakePlan(const char* from,
                                                     const char* to,
                                                     const ModelSpec& spec,
                                                     int world,
                                                     int64_t bucket_bytes) {
  HY_ASSIGN_OR_RETURN(Layout src, Layout::Parse(from));
  HY_ASSIGN_OR_RETURN(Layout dst, Layout::Parse(to));
  PlanOptions options;
  options.bucket_bytes = bucket_bytes;
  HY_ASSIGN_OR_RETURN(TransferPlan plan,
                      Plan(src, dst, spec, Topology{world, world}, options));
  return std::make_shared<const TransferPlan>(std::move(plan));
}

}  // namespace

Status RunReshardRoundTrip(const WorkerArgs& args) {
  HY_ASSIGN_OR_RETURN(std::unique_ptr<C10dTransport> t,
                      ConnectToTestStore(args));
  const int me = args.rank;
  const Model model(TestSpec(), /*seed=*/42);
  // Small buckets: several steps, each a separate AllToAllV.
  HY_ASSIGN_OR_RETURN(auto fwd, MakePlan("fsdp=4", "tp=2,dp=2", model.spec,
                                         args.world, 16 << 10));
  HY_RETURN_IF_ERROR(Check(fwd->steps.size() > 1, "the plan has steps"));
  const Buffers src = model.Shards(fwd->src, me, WireFormat::kRaw);

  int64_t wire_sent[2] = {0, 0};
  Buffers bf16_dst;
  for (WireFormat wire : {WireFormat::kRaw, WireFormat::kBf16}) {
    const Buffers want = model.Shards(fwd->dst, me, wire);
    Buffers dst = ZerosLike(want);
    Executor executor(fwd, t.get(), Options(wire, false));
    ReshardStats stats;
    HY_RETURN_IF_ERROR(
        executor.Run(ConstViews(src), MutableViews(dst), &stats));
    HY_RETURN_IF_ERROR(CheckShards(
        model.spec, dst, want,
        std::string("fsdp=4 -> tp=2,dp=2 ") + WireFormatName(wire)));
    HY_ASSIGN_OR_RETURN(wire_sent[wire == WireFormat::kBf16],
                        SumOverRanks(t.get(), stats.wire_bytes_sent));
    if (wire == WireFormat::kBf16) bf16_dst = std::move(dst);
  }
  // bf16 halves the f32 bytes on the wire (int32 travels raw).
  HY_RETURN_IF_ERROR(Check(
      wire_sent[1] * 10 < wire_sent[0] * 6,
      "bf16 sends about half the raw bytes: " + std::to_string(wire_sent[1]) +
          " vs " + std::to_string(wire_sent[0])));

  // And back: the bf16 rollout shards, as a bf16 model, to fsdp=4, raw.
  Model model16 = model;
  for (size_t i = 0; i < model16.spec.tensors.size(); ++i) {
    TensorMeta& meta = model16.spec.tensors[i].meta;
    if (meta.dtype != DType::kF32) continue;
    meta.dtype = DType::kBF16;
    std::vector<uint8_t> narrow(model.global[i].size() / 2);
    CastF32ToBf16(model.global[i].data(), narrow.data(), narrow.size() / 2);
    model16.global[i] = std::move(narrow);
  }
  HY_ASSIGN_OR_RETURN(auto back, MakePlan("tp=2,dp=2", "fsdp=4", model16.spec,
                                          args.world, 16 << 10));
  const Buffers want = model16.Shards(back->dst, me, WireFormat::kRaw);
  Buffers dst = ZerosLike(want);
  Executor executor(back, t.get(), Options(WireFormat::kRaw, false));
  ReshardStats stats;
  HY_RETURN_IF_ERROR(
      executor.Run(ConstViews(bf16_dst), MutableViews(dst), &stats));
  HY_RETURN_IF_ERROR(
      CheckShards(model16.spec, dst, want, "tp=2,dp=2 -> fsdp=4 raw (bf16)"));
  return t->Barrier();
}

Status RunSparseDelta(const WorkerArgs& args) {
  HY_ASSIGN_OR_RETURN(std::unique_ptr<C10dTransport> t,
                      ConnectToTestStore(args));
  const int me = args.rank;
  Model model(TestSpec(), /*seed=*/7);
  HY_ASSIGN_OR_RETURN(auto plan, MakePlan("fsdp=4", "tp=2,dp=2", model.spec,
                                          args.world, 64 << 10));
  Executor full(plan, t.get(), Options(WireFormat::kBf16, false));
  Executor delta(plan, t.get(), Options(WireFormat::kBf16, true));

  // The first delta run sends everything.
  Buffers want = model.Shards(plan->dst, me, WireFormat::kBf16);
  Buffers delta_dst = ZerosLike(want);
  ReshardStats stats;
  Buffers src = model.Shards(plan->src, me, WireFormat::kRaw);
  HY_RETURN_IF_ERROR(
      delta.Run(ConstViews(src), MutableViews(delta_dst), &stats));
  HY_RETURN_IF_ERROR(CheckShards(model.spec, delta_dst, want, "delta run 0"));

  const double fractions[] = {0.0, 0.01, 0.10, 1.0};
  int64_t full_bytes = 0;
  int64_t delta_bytes[4] = {0, 0, 0, 0};
  for (int k = 0; k < 4; ++k) {
    model.Change(k + 1, fractions[k]);
    src = model.Shards(plan->src, me, WireFormat::kRaw);
    want = model.Shards(plan->dst, me, WireFormat::kBf16);
    ReshardStats delta_stats, full_stats;
    HY_RETURN_IF_ERROR(
        delta.Run(ConstViews(src), MutableViews(delta_dst), &delta_stats));
    Buffers full_dst = ZerosLike(want);
    HY_RETURN_IF_ERROR(
        full.Run(ConstViews(src), MutableViews(full_dst), &full_stats));
    const std::string what =
        "delta after changing " + std::to_string(fractions[k] * 100) + "%";
    HY_RETURN_IF_ERROR(CheckShards(model.spec, full_dst, want, "full"));
    HY_RETURN_IF_ERROR(CheckShards(model.spec, delta_dst, want, what));
    HY_ASSIGN_OR_RETURN(delta_bytes[k],
                        SumOverRanks(t.get(), delta_stats.wire_bytes_sent));
    HY_ASSIGN_OR_RETURN(full_bytes,
                        SumOverRanks(t.get(), full_stats.wire_bytes_sent));
  }
  if (me == 0) {
    std::fprintf(stderr,
                 "wire bytes, all ranks: full bf16 %lld; delta at 0%% %lld, "
                 "1%% %lld, 10%% %lld, 100%% %lld\n",
                 static_cast<long long>(full_bytes),
                 static_cast<long long>(delta_bytes[0]),
                 static_cast<long long>(delta_bytes[1]),
                 static_cast<long long>(delta_bytes[2]),
                 static_cast<long long>(delta_bytes[3]));
  }
  const std::string numbers =
      " (full " + std::to_string(full_bytes) +
      ", delta 0/1/10/100%: " + std::to_string(delta_bytes[0]) + "/" +
      std::to_string(delta_bytes[1]) + "/" + std::to_string(delta_bytes[2]) +
      "/" + std::to_string(delta_bytes[3]) + ")";
  HY_RETURN_IF_ERROR(Check(delta_bytes[0] <= delta_bytes[1] &&
                               delta_bytes[1] < delta_bytes[2] &&
                               delta_bytes[2] <= delta_bytes[3],
                           "delta bytes grow with the change" + numbers));
  HY_RETURN_IF_ERROR(Check(delta_bytes[1] * 10 <= full_bytes,
                           "1% changed moves >= 10x fewer bytes" + numbers));
  HY_RETURN_IF_ERROR(Check(delta_bytes[2] * 2 <= full_bytes,
                           "10% changed moves >= 2x fewer bytes" + numbers));
  HY_RETURN_IF_ERROR(
      Check(delta_bytes[3] <= full_bytes + full_bytes / 10,
            "100% changed moves about the full bytes" + numbers));
  return t->Barrier();
}

}  // namespace hy::reshard::testing
