#include "offload.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "hy/common/process_memory.h"

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;

// The offloaded tensor keeps its values across Release, leaves no file in
// its directory, and after Release its pages are no longer resident.
TEST(OffloadTest, ReleaseGivesThePagesBackAndKeepsTheValues) {
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("hy_offload_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int64_t n = int64_t{64} << 20 >> 2;  // 64 MiB of f32.
  auto t = OffloadedTensor::Create(dir.string(), n);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(fs::is_empty(dir));  // Unlinked at once.
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
  fs::remove_all(dir);
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
