#include "offload.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../temp_dir.h"
#include "hy/common/process_memory.h"

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
