// Helpers for the reshard tests: random model specs and layouts, global
// tensors with random contents, and the expected shard of a rank computed
// straight from its geometry (independently of the planner).

#ifndef HY_TESTS_RESHARD_RESHARD_TEST_UTIL_H_
#define HY_TESTS_RESHARD_RESHARD_TEST_UTIL_H_

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hy/common/bf16.h"
#include "hy/common/dtype.h"
#include "hy/reshard/executor.h"
#include "hy/reshard/layout.h"
#include "hy/reshard/model_spec.h"
#include "hy/reshard/shard_map.h"

namespace hy::reshard::testing {

inline TensorSpec MakeTensor(const std::string& name, DType dtype,
                             std::vector<int64_t> shape, int tp_dim,
                             StageRule::Kind kind = StageRule::Kind::kAll,
                             int layer = 0) {
  TensorSpec t;
  t.meta.name = name;
  t.meta.dtype = dtype;
  t.meta.shape = std::move(shape);
  t.tp_dim = tp_dim;
  t.stage.kind = kind;
  t.stage.layer = layer;
  return t;
}

// A small Llama-like model: embed (first), `layers` layers of q/k/v/o,
// gate/up/down and two norms, final norm and lm_head (last). Every dimension
// is a multiple of 8, so tp up to 8 divides them.
inline ModelSpec TinyLlama(int layers, int hidden = 16, int vocab = 32,
                           DType dtype = DType::kF32) {
  using K = StageRule::Kind;
  ModelSpec spec;
  spec.tensors.push_back(
      MakeTensor("model.embed_tokens.weight", dtype, {vocab, hidden}, 0, K::kFirst));
  for (int l = 0; l < layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : {"q", "k", "v"}) {
      spec.tensors.push_back(MakeTensor(p + "self_attn." + n + "_proj.weight",
                                        dtype, {hidden, hidden}, 0, K::kLayer, l));
    }
    spec.tensors.push_back(MakeTensor(p + "self_attn.o_proj.weight", dtype,
                                      {hidden, hidden}, 1, K::kLayer, l));
    spec.tensors.push_back(MakeTensor(p + "mlp.gate_proj.weight", dtype,
                                      {2 * hidden, hidden}, 0, K::kLayer, l));
    spec.tensors.push_back(MakeTensor(p + "mlp.up_proj.weight", dtype,
                                      {2 * hidden, hidden}, 0, K::kLayer, l));
    spec.tensors.push_back(MakeTensor(p + "mlp.down_proj.weight", dtype,
                                      {hidden, 2 * hidden}, 1, K::kLayer, l));
    spec.tensors.push_back(MakeTensor(p + "input_layernorm.weight", dtype,
                                      {hidden}, -1, K::kLayer, l));
    spec.tensors.push_back(MakeTensor(p + "post_attention_layernorm.weight",
                                      dtype, {hidden}, -1, K::kLayer, l));
  }
  spec.tensors.push_back(MakeTensor("model.norm.weight", dtype, {hidden}, -1, K::kLast));
  spec.tensors.push_back(
      MakeTensor("lm_head.weight", dtype, {vocab, hidden}, 0, K::kLast));
  return spec;
}

// Random bytes for every tensor; f32/bf16 values are finite normals so a
// bf16 cast is meaningful (NaN payloads are tested elsewhere).
inline std::vector<std::vector<uint8_t>> RandomGlobals(const ModelSpec& spec,
                                                       std::mt19937_64& rng) {
  std::vector<std::vector<uint8_t>> out;
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (const TensorSpec& t : spec.tensors) {
    int64_t n = t.meta.NumElements().value();
    size_t es = DTypeSize(t.meta.dtype);
    std::vector<uint8_t> bytes(n * es);
    if (t.meta.dtype == DType::kF32) {
      for (int64_t i = 0; i < n; ++i) {
        float f = normal(rng);
        std::memcpy(&bytes[i * 4], &f, 4);
      }
    } else {
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    }
    out.push_back(std::move(bytes));
  }
  return out;
}

// The elements `runs` (global, in local order) of a global tensor, cast to
// the wire dtype: what a destination shard must hold.
inline std::vector<uint8_t> Slice(const std::vector<uint8_t>& global,
                                  DType dtype, const std::vector<FlatRun>& runs,
                                  WireFormat wire = WireFormat::kRaw) {
  size_t es = DTypeSize(dtype);
  std::vector<uint8_t> raw;
  for (const FlatRun& r : runs) {
    raw.insert(raw.end(), global.begin() + r.offset * es,
               global.begin() + r.end() * es);
  }
  if (WireDType(dtype, wire) == dtype) return raw;
  std::vector<uint8_t> out(raw.size() / 2);
  CastF32ToBf16(raw.data(), out.data(), raw.size() / 4);
  return out;
}

// Per rank and tensor: the source shards cut from the globals.
inline std::vector<std::vector<std::vector<uint8_t>>> CutShards(
    const ShardMap& map, const ModelSpec& spec,
    const std::vector<std::vector<uint8_t>>& globals,
    WireFormat wire = WireFormat::kRaw) {
  std::vector<std::vector<std::vector<uint8_t>>> out(map.world_size());
  for (int r = 0; r < map.world_size(); ++r) {
    for (int t = 0; t < map.num_tensors(); ++t) {
      out[r].push_back(Slice(globals[t], spec.tensors[t].meta.dtype,
                             map.Get(r, t).runs, wire));
    }
  }
  return out;
}

}  // namespace hy::reshard::testing

#endif  // HY_TESTS_RESHARD_RESHARD_TEST_UTIL_H_
