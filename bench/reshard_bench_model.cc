// The reshard benchmark's model and data (see reshard_bench_model.h).

#include "reshard_bench_model.h"

#include <cstring>
#include <string>

#include "hy/common/bf16.h"

namespace hy::bench {
namespace {

using reshard::ModelSpec;
using reshard::ShardMap;
using reshard::WireFormat;

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

// The source value of element i of tensor t: uniform in [-1, 1).
uint32_t BaseBits(size_t t, int64_t i) {
  const float f = static_cast<float>(Mix((t << 40) ^ i) >> 40) / (1 << 23) - 1;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

std::vector<TensorMeta> LlamaShapes(int64_t h) {
  const int layers = 8;
  const int64_t inter = (h * 11 / 4 + 63) / 64 * 64, vocab = 4 * h;
  std::vector<TensorMeta> m;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    m.push_back(TensorMeta{std::move(name), DType::kF32, std::move(shape)});
  };
  add("model.embed_tokens.weight", {vocab, h});
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : {"q", "k", "v", "o"}) {
      add(p + "self_attn." + n + "_proj.weight", {h, h});
    }
    add(p + "mlp.gate_proj.weight", {inter, h});
    add(p + "mlp.up_proj.weight", {inter, h});
    add(p + "mlp.down_proj.weight", {h, inter});
    add(p + "input_layernorm.weight", {h});
    add(p + "post_attention_layernorm.weight", {h});
  }
  add("model.norm.weight", {h});
  add("lm_head.weight", {vocab, h});
  return m;
}

int64_t TotalBytes(const std::vector<TensorMeta>& tensors) {
  int64_t n = 0;
  for (const TensorMeta& t : tensors) n += t.ByteSize().value_or(0);
  return n;
}

}  // namespace

Result<ModelSpec> LlamaSpec(int64_t size_mib) {
  int64_t h = 64;
  while (TotalBytes(LlamaShapes(h + 64)) <= (size_mib << 20)) h += 64;
  return ModelSpec::Build(LlamaShapes(h), reshard::ModelRules::Default());
}

bool ChangeRound::Changes(size_t tensor, int64_t index) const {
  return Mix(salt ^ (tensor << 40) ^ index) % 1000000 < per_million;
}

ShardBuffers MakeSourceShards(const ShardMap& map, int rank) {
  ShardBuffers out(map.num_tensors());
  for (size_t t = 0; t < out.size(); ++t) {
    const reshard::RankShard& shard = map.Get(rank, static_cast<int>(t));
    out[t].resize(shard.num_elements * 4);
    uint8_t* p = out[t].data();
    for (const FlatRun& run : shard.runs) {
      for (int64_t i = run.offset; i < run.end(); ++i, p += 4) {
        const uint32_t bits = BaseBits(t, i);
        std::memcpy(p, &bits, 4);
      }
    }
  }
  return out;
}

void ApplyRound(const ShardMap& map, int rank, const ChangeRound& round,
                ShardBuffers* shards) {
  for (size_t t = 0; t < shards->size(); ++t) {
    uint8_t* p = (*shards)[t].data();
    for (const FlatRun& run : map.Get(rank, static_cast<int>(t)).runs) {
      for (int64_t i = run.offset; i < run.end(); ++i, p += 4) {
        if (!round.Changes(t, i)) continue;
        uint32_t bits;
        std::memcpy(&bits, p, 4);
        bits += 0x10000;
        std::memcpy(p, &bits, 4);
      }
    }
  }
}

ShardBuffers MakeDestShards(const ModelSpec& spec, const ShardMap& map,
                            int rank, WireFormat wire) {
  ShardBuffers out(spec.tensors.size());
  for (size_t t = 0; t < out.size(); ++t) {
    const DType d = reshard::WireDType(spec.tensors[t].meta.dtype, wire);
    out[t].assign(
        map.Get(rank, static_cast<int>(t)).num_elements * DTypeSize(d), 0);
  }
  return out;
}

Status VerifyShards(const ModelSpec& spec, const ShardMap& map, int rank,
                    WireFormat wire, const std::vector<ChangeRound>& rounds,
                    const ShardBuffers& shards) {
  const size_t es = wire == WireFormat::kBf16 ? 2 : 4;
  for (size_t t = 0; t < shards.size(); ++t) {
    const uint8_t* p = shards[t].data();
    for (const FlatRun& run : map.Get(rank, static_cast<int>(t)).runs) {
      for (int64_t i = run.offset; i < run.end(); ++i, p += es) {
        uint32_t want = BaseBits(t, i);
        for (const ChangeRound& r : rounds) {
          if (r.Changes(t, i)) want += 0x10000;
        }
        uint32_t got = 0;
        if (es == 2) {
          uint16_t narrow;
          std::memcpy(&narrow, p, 2);
          got = narrow;
          want = F32BitsToBf16Bits(want);
        } else {
          std::memcpy(&got, p, 4);
        }
        if (got != want) {
          return Status::DataLoss("rank " + std::to_string(rank) + ": " +
                                  spec.tensors[t].meta.name + " element " +
                                  std::to_string(i) +
                                  " differs after the reshard");
        }
      }
    }
  }
  return Status::OK();
}

}  // namespace hy::bench
