#include "nccl_test_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>

#include "hy/common/bf16.h"
#include "hy/common/dtype.h"

namespace hy::reshard::nccl_test {

namespace {

TensorSpec Tensor(const std::string& name, DType dtype,
                  std::vector<int64_t> shape, int tp_dim, StageRule stage) {
  TensorSpec t;
  t.meta.name = name;
  t.meta.dtype = dtype;
  t.meta.shape = std::move(shape);
  t.tp_dim = tp_dim;
  t.stage = stage;
  return t;
}

StageRule LayerStage(int layer) {
  StageRule s;
  s.kind = StageRule::Kind::kLayer;
  s.layer = layer;
  return s;
}

StageRule KindStage(StageRule::Kind kind) {
  StageRule s;
  s.kind = kind;
  return s;
}

}  // namespace

ModelSpec SmallModel() {
  ModelSpec spec;
  spec.tensors.push_back(Tensor("embed", DType::kF32, {64, 24}, 0,
                                KindStage(StageRule::Kind::kFirst)));
  for (int l = 0; l < 2; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    spec.tensors.push_back(
        Tensor(p + "q", DType::kF32, {32, 24}, 0, LayerStage(l)));
    spec.tensors.push_back(
        Tensor(p + "o", DType::kF32, {24, 36}, 1, LayerStage(l)));
    spec.tensors.push_back(
        Tensor(p + "bias", DType::kBF16, {37}, -1, LayerStage(l)));
  }
  spec.tensors.push_back(
      Tensor("norm", DType::kF32, {24}, -1, KindStage(StageRule::Kind::kLast)));
  spec.tensors.push_back(
      Tensor("steps", DType::kI64, {5}, -1, KindStage(StageRule::Kind::kAll)));
  return spec;
}

std::vector<Bytes> RandomGlobals(const ModelSpec& spec, uint32_t seed) {
  std::mt19937 rng(seed);
  static const uint32_t kEdges[] = {
      0x7FC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0x7F800000u,
      0xFF800000u, 0x7F7FFFFFu, 0x00000001u, 0x00008000u, 0x00018000u,
      0x807FFFFFu, 0x80000000u, 0x3F808000u, 0x3F818000u, 0x00000000u};
  std::vector<Bytes> out;
  for (const TensorSpec& t : spec.tensors) {
    int64_t n = 1;
    for (int64_t d : t.meta.shape) n *= d;
    Bytes b(static_cast<size_t>(n) * DTypeSize(t.meta.dtype));
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    if (t.meta.dtype == DType::kF32) {
      for (size_t i = 0; i < std::size(kEdges) && i * 4 < b.size(); ++i) {
        const size_t at = (rng() % (b.size() / 4)) * 4;
        std::memcpy(b.data() + at, &kEdges[i], 4);
      }
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<Bytes> Shards(const ModelSpec& spec, const ShardMap& map, int rank,
                          const std::vector<Bytes>& globals, WireFormat wire) {
  std::vector<Bytes> out;
  for (int t = 0; t < static_cast<int>(spec.tensors.size()); ++t) {
    const DType dtype = spec.tensors[t].meta.dtype;
    const size_t es = DTypeSize(dtype);
    const bool cast = WireDType(dtype, wire) != dtype;
    const RankShard& shard = map.Get(rank, t);
    Bytes raw;
    if (shard.has_shard) {
      for (const FlatRun& run : shard.runs) {
        const uint8_t* p = globals[t].data() + run.offset * es;
        raw.insert(raw.end(), p, p + run.length * es);
      }
    }
    if (cast) {
      Bytes narrow(raw.size() / 2);
      CastF32ToBf16(raw.data(), narrow.data(), raw.size() / 4);
      raw = std::move(narrow);
    }
    out.push_back(std::move(raw));
  }
  return out;
}

std::shared_ptr<const TransferPlan> MakePlan(const ModelSpec& spec,
                                             const std::string& from,
                                             const std::string& to, int world,
                                             int64_t bucket_bytes) {
  auto src = Layout::Parse(from);
  auto dst = Layout::Parse(to);
  EXPECT_TRUE(src.ok() && dst.ok()) << from << " -> " << to;
  if (!src.ok() || !dst.ok()) return nullptr;
  PlanOptions options;
  options.bucket_bytes = bucket_bytes;
  auto plan = Plan(*src, *dst, spec, Topology{world, 2}, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return nullptr;
  return std::make_shared<const TransferPlan>(std::move(*plan));
}

Status MemoryStore::Set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  values_[key] = value;
  cv_.notify_all();
  return Status::OK();
}

Result<std::string> MemoryStore::Get(const std::string& key) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::seconds(10),
                    [&] { return values_.count(key) > 0; })) {
    return Status::DeadlineExceeded("MemoryStore: no key " + key);
  }
  return values_[key];
}

}  // namespace hy::reshard::nccl_test
