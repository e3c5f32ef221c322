// The reshard benchmark's model and data (see reshard_bench.cc): Llama
// shapes, f32 values that every process derives from (tensor, element)
// alone, change rounds that alter exactly a chosen set of bf16 values, and
// a bitwise check of destination shards.
//
// Thread-safety: pure functions.

#ifndef HY_BENCH_RESHARD_BENCH_MODEL_H_
#define HY_BENCH_RESHARD_BENCH_MODEL_H_

#include <cstdint>
#include <vector>

#include "hy/common/result.h"
#include "hy/reshard/executor.h"
#include "hy/reshard/model_spec.h"
#include "hy/reshard/shard_map.h"

namespace hy::bench {

using ShardBuffers = std::vector<std::vector<uint8_t>>;  // One per tensor.

// Llama shapes (vocab 4h, intermediate 2.75h rounded to 64, 8 layers) with
// the largest hidden size h, a multiple of 64 and at least 64, that keeps
// the f32 model within size_mib; split by the shipped Llama rules.
Result<reshard::ModelSpec> LlamaSpec(int64_t size_mib);

// A change round: the elements it picks (per_million in a million, by a
// hash of salt, tensor and index) get one bf16 ulp more, so exactly those
// values change in bf16 too.
struct ChangeRound {
  uint64_t salt = 0;
  uint64_t per_million = 0;
  bool Changes(size_t tensor, int64_t index) const;
};

// Rank `rank`'s f32 source shards under `map`.
ShardBuffers MakeSourceShards(const reshard::ShardMap& map, int rank);

// Applies `round` to shards MakeSourceShards(map, rank) made.
void ApplyRound(const reshard::ShardMap& map, int rank,
                const ChangeRound& round, ShardBuffers* shards);

// Zeroed destination shards of rank `rank` under `map`, in the wire dtype.
ShardBuffers MakeDestShards(const reshard::ModelSpec& spec,
                            const reshard::ShardMap& map, int rank,
                            reshard::WireFormat wire);

// Returns DataLoss naming the first element of `shards` (rank `rank`'s
// destination under `map`, in the wire dtype) that differs from its source
// value after `rounds`.
Status VerifyShards(const reshard::ModelSpec& spec,
                    const reshard::ShardMap& map, int rank,
                    reshard::WireFormat wire,
                    const std::vector<ChangeRound>& rounds,
                    const ShardBuffers& shards);

}  // namespace hy::bench

#endif  // HY_BENCH_RESHARD_BENCH_MODEL_H_
