#include "hy/trainer/model/offload.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "hy/common/process_memory.h"
#include "hy/trainer/model/fsdp.h"
#include "testing/temp_dir.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;

// The offloaded tensor keeps its values across Release, leaves no file in
// its directory, and after Release its pages are no longer resident.
TEST(OffloadTest, ReleaseGivesThePagesBackAndKeepsTheValues) {
  TempDir dir;
  const int64_t n = int64_t{64} << 20 >> 2;  // 64 MiB of f32.
  auto t = OffloadedTensor::Create(dir.path(), n);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(fs::is_empty(dir.path()));  // Unlinked at once.
  at::Tensor v = t->tensor();
  ASSERT_EQ(v.numel(), n);
  EXPECT_EQ(v.sum().item<double>(), 0.0);  // Zero-filled.
  const at::Tensor want = at::arange(n, at::kFloat).mul_(0.5f);
  v.copy_(want);
  const int64_t touched = ResidentBytes();
  ASSERT_TRUE(t->Release().ok());
  const int64_t released = ResidentBytes();
  EXPECT_GT(touched - released, int64_t{48} << 20)
      << "resident " << touched << " -> " << released << " bytes";
  EXPECT_TRUE(at::equal(v, want));  // Read back from the file.
  // Released twice, and with a reader in between: still the same values.
  ASSERT_TRUE(t->Release().ok());
  ASSERT_TRUE(t->Release().ok());
  EXPECT_TRUE(at::equal(v, want));
}

// The rollout weights' form: bf16, a view per tensor of one mapping.
TEST(OffloadTest, Bf16ViewsKeepTheirValuesAcrossRelease) {
  TempDir dir;
  auto t = OffloadedTensor::Create(dir.path(), 3 * 1000, at::kBFloat16);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->tensor().scalar_type(), at::kBFloat16);
  ASSERT_EQ(t->tensor().nbytes(), 6000u);
  at::Tensor a = t->tensor().narrow(0, 0, 1000).view({10, 100});
  at::Tensor b = t->tensor().narrow(0, 1000, 2000).view({20, 100});
  const at::Tensor want_a = at::randn({10, 100}).to(at::kBFloat16);
  const at::Tensor want_b = at::randn({20, 100}).to(at::kBFloat16);
  a.copy_(want_a);
  b.copy_(want_b);
  ASSERT_TRUE(t->Release().ok());
  EXPECT_TRUE(at::equal(a, want_a));
  EXPECT_TRUE(at::equal(b, want_b));
  b.index_put_({0, 0}, 7.0);  // A write after a release lands too.
  ASSERT_TRUE(t->Release().ok());
  EXPECT_EQ(b[0][0].item<float>(), 7.0f);
}

// ReleaseRange hands back the whole pages inside a range, as a reader that
// goes chunk by chunk would (a checkpoint of the offloaded reference), and
// refuses a range outside the tensor.
TEST(OffloadTest, ReleaseRangeGivesBackThePagesInsideIt) {
  TempDir dir;
  const int64_t n = int64_t{64} << 20 >> 2;  // 64 MiB of f32.
  auto t = OffloadedTensor::Create(dir.path(), n);
  ASSERT_TRUE(t.ok()) << t.status();
  const at::Tensor want = at::arange(n, at::kFloat).mul_(0.25f);
  t->tensor().copy_(want);
  const auto* base = static_cast<const uint8_t*>(t->tensor().data_ptr());
  const size_t bytes = t->tensor().nbytes();
  const int64_t touched = ResidentBytes();
  // The first half, in 4 MiB chunks plus an odd tail that shares a page.
  const size_t chunk = 4 << 20;
  for (size_t at = 0; at < bytes / 2; at += chunk) {
    ASSERT_TRUE(t->ReleaseRange(ConstBytes(base + at, chunk)).ok());
  }
  ASSERT_TRUE(t->ReleaseRange(ConstBytes(base + bytes / 2, 100)).ok());
  const int64_t released = ResidentBytes();
  EXPECT_GT(touched - released, int64_t{28} << 20)
      << "resident " << touched << " -> " << released << " bytes";
  EXPECT_LT(touched - released, int64_t{36} << 20)
      << "only the first half was released: " << touched << " -> " << released
      << " bytes";
  EXPECT_TRUE(at::equal(t->tensor(), want));  // Read back from the file.
  // Outside the tensor, or only partly inside: refused, nothing released.
  std::vector<uint8_t> other(8192);
  EXPECT_TRUE(t->ReleaseRange(ConstBytes(other.data(), other.size()))
                  .IsInvalidArgument());
  EXPECT_TRUE(
      t->ReleaseRange(ConstBytes(base + bytes - 10, 20)).IsInvalidArgument());
  EXPECT_TRUE(t->ReleaseRange(ConstBytes()).ok());
}

// trainer.offload_optimizer: a model whose Adam moments live in a file
// steps to the same values bit for bit as one whose moments are on the
// heap, holds them resident only a chunk at a time while it steps, and
// hands the pages of its moment shards back as a save reads them.
TEST(OffloadTest, OffloadedMomentsStepTheSameAndStayOutOfMemory) {
  TempDir dir;
  ModelConfig config;
  config.vocab_size = 16000;  // About 9.5M parameters: 76 MB of moments.
  config.hidden_size = 256;
  config.intermediate_size = 512;
  auto heap = FsdpModel::Create(config, ModelRole::kActor, 0, 1);
  auto file = FsdpModel::Create(config, ModelRole::kActor, 0, 1);
  ASSERT_TRUE(heap.ok()) << heap.status();
  ASSERT_TRUE(file.ok()) << file.status();
  FsdpModel& a = **heap;
  FsdpModel& b = **file;
  a.InitFromSeed(5);
  b.InitFromSeed(5);
  OptimConfig optim;
  optim.weight_decay = 0.01;
  const int64_t n = a.piece();
  const int64_t moment_bytes = 2 * n * 4;
  ASSERT_GT(moment_bytes, int64_t{64} << 20);
  at::manual_seed(3);
  std::vector<at::Tensor> grads;
  for (int i = 0; i < 3; ++i) grads.push_back(at::randn({n}) * 1e-2);
  a.AdamStep(grads[0], optim, 1.0);  // Offloaded with values in them.
  b.AdamStep(grads[0], optim, 1.0);
  ASSERT_TRUE(b.OffloadMoments(dir.path()).ok());
  ASSERT_TRUE(b.moments_offloaded());
  EXPECT_TRUE(fs::is_empty(dir.path()));  // Unlinked at once.
  for (int i = 1; i < 3; ++i) {
    a.AdamStep(grads[i], optim, 0.5);
    const int64_t before = ResidentBytes();
    b.AdamStep(grads[i], optim, 0.5);
    const int64_t grown = ResidentBytes() - before;
    EXPECT_LT(grown, moment_bytes / 4)
        << "step " << i << ": " << grown << " bytes more resident";
  }
  EXPECT_TRUE(at::equal(a.params(), b.params()));
  EXPECT_TRUE(at::equal(a.exp_avg(), b.exp_avg()));
  EXPECT_TRUE(at::equal(a.exp_avg_sq(), b.exp_avg_sq()));
  // A save's shards: the moments' hand their pages back as they are read,
  // the parameters' (on the heap) have nothing to hand back.
  int with_hook = 0, params = 0;
  const std::vector<statestore::ShardData> shards =
      b.ShardsForSave("actor", true);
  uint64_t sum = 0;
  for (const auto& shard : shards) {  // Read, as a save would.
    const bool moment = shard.meta.name.find("/exp_avg") != std::string::npos;
    params += !moment;
    with_hook += shard.after_chunk_read != nullptr;
    EXPECT_EQ(shard.after_chunk_read != nullptr, moment) << shard.meta.name;
    for (size_t i = 0; i < shard.data.size(); i += 4096) sum += shard.data[i];
  }
  EXPECT_EQ(with_hook, 2 * params);
  const int64_t read = ResidentBytes();
  for (const auto& shard : shards) {
    if (shard.after_chunk_read) shard.after_chunk_read(shard.data);
  }
  const int64_t handed_back = read - ResidentBytes();
  EXPECT_GT(handed_back, moment_bytes / 2)
      << "read " << sum << ": " << handed_back << " bytes handed back";
  EXPECT_TRUE(b.ReleaseMoments().ok());
  EXPECT_TRUE(at::equal(a.exp_avg_sq(), b.exp_avg_sq()));  // Still there.
}

TEST(OffloadTest, ADirectoryThatCannotHoldTheFileIsAnIoError) {
  auto t = OffloadedTensor::Create("/nonexistent/hy/offload", 16);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kIOError) << t.status();
  EXPECT_NE(t.status().message().find("/nonexistent/hy/offload"),
            std::string::npos)
      << t.status();
}

}  // namespace
}  // namespace hy::trainer
