// Checkpoints on a disk that fills: each failed checkpoint is an error value
// with its cause (no_space) and counted, nothing aborts the process (RocksDB
// 7.8's own info log would, on the write after a failed one), no partial
// file is left, the newest committed step stays loadable bit for bit, and
// once there is room again the same open Checkpointers commit the next
// step.
//
// The disk is a small tmpfs in a mount namespace of this process's own:
// main() below enters a new user and mount namespace before gtest starts
// any thread. Where the kernel does not allow that, the tests skip.

#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "checkpoint_test_util.h"
#include "hy/metrics/hy_metrics.h"

namespace hy::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string g_disk;  // The tmpfs's mount point; empty when g_why says why.
std::string g_why;

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f.flush());
}

// Enters a user and mount namespace of our own and mounts a `mb` MB tmpfs
// on a fresh directory. REQUIRES: single-threaded.
void MountSmallDisk(int mb) {
  const uid_t uid = getuid();
  const gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
    g_why = std::string("unshare: ") + strerror(errno);
    return;
  }
  WriteFile("/proc/self/setgroups", "deny");
  if (!WriteFile("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
      !WriteFile("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1")) {
    g_why = "cannot map the user into the new namespace";
    return;
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    g_why = std::string("making / private: ") + strerror(errno);
    return;
  }
  std::string tmpl = (fs::temp_directory_path() / "hy-disk-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    g_why = "mkdtemp failed";
    return;
  }
  const std::string size = "size=" + std::to_string(mb) + "m";
  if (mount("tmpfs", tmpl.c_str(), "tmpfs", 0, size.c_str()) != 0) {
    g_why = std::string("mounting a tmpfs: ") + strerror(errno);
    return;
  }
  g_disk = tmpl;
}

// Writes zeros into `path` until the disk is full.
void FillDisk(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  const std::vector<char> block(1 << 16, 0);
  while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
  }
  std::fclose(f);
}

int IngestLeftovers(const std::string& root) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(root, ec)) {
    if (e.path().filename().string().rfind("hy-ingest-", 0) == 0) ++n;
  }
  return n;
}

double Failures(const metrics::HyMetrics& m,
                metrics::CheckpointFailureCause cause) {
  return m.checkpoint_failures(cause)->Value();
}

TEST(FullDiskTest, FailedCheckpointsAreCountedAndTheLastCommitStaysLoadable) {
  if (g_disk.empty()) GTEST_SKIP() << "no small disk here: " << g_why;
  const std::string root = g_disk + "/run";
  const std::string filler = g_disk + "/filler";
  constexpr int kWorld = 2;
  metrics::Registry registry;
  auto m = metrics::HyMetrics::Register(registry);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::unique_ptr<Checkpointer>> ckpts(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    CheckpointOptions o = Options(root, r, kWorld);
    if (r == 0) o.metrics = &*m;
    auto c = Checkpointer::Open(o);
    ASSERT_TRUE(c.ok()) << c.status();
    ckpts[r] = std::move(*c);
  }
  // Each rank saves `step` on its own thread; returns each rank's Wait().
  auto save = [&](uint64_t step) {
    const State s = MakeState(step);
    std::vector<Status> out(kWorld);
    RunRanks(kWorld, [&](int r) {
      auto part = MakePart(s, kWorld, r);
      Status st = ckpts[r]->Save(step, part->shards, part->blobs,
                                 Layout(kWorld), "rules");
      out[r] = st.ok() ? ckpts[r]->Wait() : st;
    });
    return out;
  };
  for (const Status& s : save(1)) ASSERT_TRUE(s.ok()) << s;

  FillDisk(filler);
  // Many failures in a row: RocksDB logs each (and its own info log would
  // abort on the first line after one it could not write).
  constexpr uint64_t kLastFailed = 21;
  for (uint64_t step = 2; step <= kLastFailed; ++step) {
    const std::vector<Status> got = save(step);
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_FALSE(got[r].ok()) << "rank " << r << " saved step " << step
                                << " on a full disk";
      EXPECT_EQ(FailureCause(got[r]), metrics::CheckpointFailureCause::kNoSpace)
          << got[r];
      const CheckpointStatus cs = ckpts[r]->status();
      EXPECT_EQ(cs.committed_step, 1);
      EXPECT_EQ(cs.failed_step, int64_t(step));
      EXPECT_EQ(cs.failures, step - 1);
      EXPECT_EQ(cs.consecutive_failures, int(step - 1));
    }
  }
  EXPECT_EQ(Failures(*m, metrics::CheckpointFailureCause::kNoSpace),
            kLastFailed - 1);
  EXPECT_EQ(Failures(*m, metrics::CheckpointFailureCause::kIo), 0);
  EXPECT_EQ(IngestLeftovers(root), 0) << "a failed save left its SST behind";
  {
    auto reader = CheckpointReader::Open(root);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->step(), 1u);
    ExpectState(reader->get(), 1);
  }

  // Room again: the same stores (still open) take a next step once
  // RocksDB's own recovery has seen the space (it looks every 5 s).
  fs::remove(filler);
  uint64_t next = kLastFailed;
  std::vector<Status> got;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    got = save(++next);
    if (got[0].ok() && got[1].ok()) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  } while (std::chrono::steady_clock::now() < give_up);
  for (const Status& s : got) ASSERT_TRUE(s.ok()) << "after room was made: " << s;
  const uint64_t kNext = next;
  for (int r = 0; r < kWorld; ++r) {
    const CheckpointStatus cs = ckpts[r]->status();
    EXPECT_EQ(cs.committed_step, int64_t(kNext));
    EXPECT_EQ(cs.consecutive_failures, 0);
    EXPECT_EQ(cs.failures, kNext - 2);
  }
  ckpts.clear();  // Closing stores that saw the disk full: no abort.
  auto reader = CheckpointReader::Open(root);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->step(), kNext);
  ExpectState(reader->get(), kNext);
}

TEST(FailureCauseTest, ReadsTheCodeAndTheQuotedErrors) {
  using C = metrics::CheckpointFailureCause;
  EXPECT_EQ(FailureCause(Status::ResourceExhausted(
                "saving: IO error: No space left on device: While appending")),
            C::kNoSpace);
  // The coordinator's abort quotes a rank's error: the text decides.
  EXPECT_EQ(FailureCause(Status::Aborted(
                "not every rank prepared: rank 1: ResourceExhausted: "
                "finishing x.sst: IO error: No space left on device")),
            C::kNoSpace);
  EXPECT_EQ(FailureCause(Status::IOError("writing x: Disk quota exceeded")),
            C::kNoSpace);
  EXPECT_EQ(FailureCause(Status::IOError("writing x: Input/output error")),
            C::kIo);
  EXPECT_EQ(FailureCause(Status::Aborted("rank 0: IOError: fsync failed")),
            C::kIo);
  EXPECT_EQ(FailureCause(Status::Unavailable("rank 1 did not prepare")),
            C::kPeer);
  EXPECT_EQ(FailureCause(Status::DeadlineExceeded("no decision in time")),
            C::kPeer);
  EXPECT_EQ(FailureCause(Status::Aborted("version 3 aborted")), C::kOther);
  EXPECT_EQ(metrics::LabelValue(C::kNoSpace), "no_space");
}

}  // namespace
}  // namespace hy::checkpoint

int main(int argc, char** argv) {
  // Before gtest (or anything else) starts a thread: unshare needs that.
  hy::checkpoint::MountSmallDisk(32);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (!hy::checkpoint::g_disk.empty()) {
    umount2(hy::checkpoint::g_disk.c_str(), MNT_DETACH);
    rmdir(hy::checkpoint::g_disk.c_str());  // The directory under it.
  }
  return rc;
}
