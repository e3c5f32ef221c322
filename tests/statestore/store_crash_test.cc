// Crash safety: a child process saves and commits versions in a loop and is
// killed with SIGKILL at random moments. After every kill the store must
// open, every committed version must verify and read back exactly what was
// written for it, and nothing uncommitted may be visible. Gc then removes
// the leftovers. HY_CRASH_ITERATIONS sets the number of kills (default 50).

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "hy/statestore/store.h"
#include "raw_db.h"
#include "store_test_util.h"

namespace hy::statestore {
namespace {

using testing::Bytes;
using testing::Commit;
using testing::SmallChunks;
using testing::TempDir;
using testing::WholeShard;

// What version v holds: "w" changes every third version (so later versions
// share its chunks), "b" every version.
std::vector<uint8_t> W(uint64_t v) { return Bytes(65536, 1000 + v / 3); }
std::vector<uint8_t> B(uint64_t v) { return Bytes(8192, v); }

[[noreturn]] void ChildLoop(const std::string& path) {
  auto opened = Store::Open(path, SmallChunks());
  if (!opened.ok()) _exit(3);
  std::unique_ptr<Store> store = std::move(opened).value();
  // As a restarting job does: give up what a dead process left uncommitted,
  // and go on with fresh version numbers.
  auto versions = store->ListVersions();
  if (!versions.ok()) _exit(6);
  uint64_t v = 1;
  for (const VersionInfo& info : *versions) {
    if (!info.committed && !info.aborted && !store->Abort(info.version).ok()) {
      _exit(7);
    }
    v = info.version + 1;
  }
  for (;; ++v) {
    const auto w = W(v), b = B(v);
    const std::string step = std::to_string(v);
    SavePart p{v,
               0,
               {WholeShard("w", DType::kF32, {16384}, w),
                WholeShard("b", DType::kU8, {8192}, b)},
               {{"step", kReplicatedBlob, ConstBytes(step)}}};
    if (!store->Save(p, nullptr).ok()) _exit(4);
    if (!store->Commit(Commit(v)).ok()) _exit(5);
  }
}

// Totals over the run, printed at the end so a run that never caught a
// writer mid-save is visible.
struct Tally {
  uint64_t latest = 0;     // Newest committed version seen.
  uint64_t leftovers = 0;  // Uncommitted versions seen after kills.
};
Tally tally;

void CheckStore(const std::string& path, uint64_t* committed_seen) {
  auto opened = Store::Open(path, SmallChunks());
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<Store> store = std::move(opened).value();
  auto versions = store->ListVersions();
  ASSERT_TRUE(versions.ok()) << versions.status();
  uint64_t committed = 0;
  for (const VersionInfo& info : *versions) {
    if (!info.committed) {
      EXPECT_TRUE(store->ReadManifest(info.version).status().IsNotFound());
      if (!info.aborted) ++tally.leftovers;
      continue;
    }
    ++committed;
    tally.latest = std::max(tally.latest, info.version);
    auto report = store->Verify(info.version);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_TRUE(report->ok())
        << "version " << info.version << ": " << report->bad[0].status;
    std::vector<uint8_t> w(65536), b(8192);
    ASSERT_TRUE(
        store->ReadRegion(info.version, "w", {0, 16384}, MutableBytes(w)).ok());
    ASSERT_TRUE(
        store->ReadRegion(info.version, "b", {0, 8192}, MutableBytes(b)).ok());
    ASSERT_EQ(w, W(info.version)) << info.version;
    ASSERT_EQ(b, B(info.version)) << info.version;
    ASSERT_EQ(*store->ReadBlob(info.version, "step"),
              std::to_string(info.version));
  }
  *committed_seen = committed;
}

// Bytes in the live SST files of the store's `chunks` column family (what
// RocksDB reports, so files it has already dropped do not count).
uint64_t ChunkFileBytes(const std::string& path) {
  testing::RawDb raw(path, /*read_only=*/true);
  if (!raw.ok()) return 0;
  rocksdb::ColumnFamilyMetaData md;
  raw.db()->GetColumnFamilyMetaData(raw.cf(testing::kChunksCf), &md);
  return md.size;
}

TEST(StoreCrashTest, KilledWritersNeverLeaveAPartialVersion) {
  TempDir dir;
  const std::string path = dir.Sub("store");
  const char* env = std::getenv("HY_CRASH_ITERATIONS");
  const int iterations = env ? std::atoi(env) : 50;
  std::mt19937 rng(12345);
  uint64_t committed = 0;
  for (int i = 0; i < iterations; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) ChildLoop(path);
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + rng() % 300));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status))
        << "child exited by itself with code " << WEXITSTATUS(status);
    CheckStore(path, &committed);
    if (HasFatalFailure()) return;
    if (i % 10 == 9) {  // Collect now and then, as a long job would.
      auto store = *Store::Open(path, SmallChunks());
      GcOptions gc;
      gc.keep_last = 5;
      ASSERT_TRUE(store->Gc(gc).ok());
    }
  }
  EXPECT_GT(committed, 0u);
  std::printf(
      "%d kills; %llu versions committed; %llu uncommitted "
      "leftovers seen after kills\n",
      iterations, static_cast<unsigned long long>(tally.latest),
      static_cast<unsigned long long>(tally.leftovers));
  std::printf("chunk files before the final Gc: %llu bytes\n",
              static_cast<unsigned long long>(ChunkFileBytes(path)));

  // A final Gc leaves only committed versions and no ingest leftovers.
  auto store = *Store::Open(path, SmallChunks());
  GcOptions gc;
  gc.keep_last = 2;
  auto report = store->Gc(gc);
  ASSERT_TRUE(report.ok()) << report.status();
  auto versions = *store->ListVersions();
  ASSERT_FALSE(versions.empty());
  for (const VersionInfo& v : versions) {
    if (!v.committed && !v.prepared.empty()) {
      EXPECT_GT(v.version, versions.front().version);
    }
  }
  store.reset();
  // The data of dropped versions and of killed saves is gone too: two
  // versions hold at most ~150 KB of chunks; Gc repacks epochs under half
  // live, so their files stay within twice that plus table overhead.
  const uint64_t chunk_bytes = ChunkFileBytes(path);
  std::printf("chunk files after it: %llu bytes\n",
              static_cast<unsigned long long>(chunk_bytes));
  EXPECT_LT(chunk_bytes, 400u << 10);
  for (const auto& e : std::filesystem::directory_iterator(path)) {
    const bool leftover =
        e.path().filename().string().rfind("hy-ingest-", 0) == 0;
    EXPECT_FALSE(leftover) << e.path();
  }
  CheckStore(path, &committed);
  EXPECT_LE(committed, 2u);
}

}  // namespace
}  // namespace hy::statestore
