// Helpers shared by the NCCL executor tests: a small mixed-dtype model,
// random global tensors, the shards a layout gives each rank, an in-memory
// KeyValueStore, and the GPU check the GPU tests skip on.

#ifndef HY_TESTS_RESHARD_NCCL_NCCL_TEST_UTIL_H_
#define HY_TESTS_RESHARD_NCCL_NCCL_TEST_UTIL_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hy/reshard/executor.h"
#include "hy/reshard/model_spec.h"
#include "hy/reshard/plan.h"
#include "hy/reshard/transport.h"

namespace hy::reshard::nccl_test {

using Bytes = std::vector<uint8_t>;

// Two layers of column- and row-parallel f32 weights, f32 embeddings and
// norm, a bf16 bias and an i64 buffer (so a bf16 wire casts some tensors
// and passes others through). Every TP dimension divides by 4.
ModelSpec SmallModel();

// One buffer per tensor of random bytes; f32 tensors also get NaNs,
// infinities, denormals and rounding ties.
std::vector<Bytes> RandomGlobals(const ModelSpec& spec, uint32_t seed);

// Rank `rank`'s shard of every tensor under `map`, in the wire dtype of
// `wire` (f32 cast to bf16 with hy::F32BitsToBf16Bits for kBf16).
std::vector<Bytes> Shards(const ModelSpec& spec, const ShardMap& map, int rank,
                          const std::vector<Bytes>& globals, WireFormat wire);

// Plan from `from` to `to` over `world` ranks, 2 per node.
std::shared_ptr<const TransferPlan> MakePlan(const ModelSpec& spec,
                                             const std::string& from,
                                             const std::string& to, int world,
                                             int64_t bucket_bytes);

// A KeyValueStore in memory, shared by threads. Get waits up to 10 s.
class MemoryStore : public KeyValueStore {
 public:
  Status Set(const std::string& key, const std::string& value) override;
  Result<std::string> Get(const std::string& key) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
};

}  // namespace hy::reshard::nccl_test

#endif  // HY_TESTS_RESHARD_NCCL_NCCL_TEST_UTIL_H_
