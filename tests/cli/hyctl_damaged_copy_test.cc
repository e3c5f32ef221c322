// A damaged chunk in one copy of a run's part (8 bytes flipped in a primary
// store's SST file, as a failing disk does): the offline readers (restore,
// export, export-hf) read the replica instead, say so and give the same
// bytes; with every copy damaged they fail with DataLoss (exit 3), naming
// the copies.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "hyctl_run.h"

namespace hy::cli {
namespace {

namespace fs = std::filesystem;
using hy::testing::CmdResult;
using hy::testing::RunCommand;

using hy::testing::kCleanEnv;

std::string Hyctl() { return std::string(kCleanEnv) + HYCTL_PATH + " "; }

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Overwrites 8 bytes in the middle of the largest SST file of `store`.
void FlipBytes(const fs::path& store) {
  fs::path largest;
  uintmax_t size = 0;
  for (const auto& e : fs::directory_iterator(store)) {
    if (e.path().extension() == ".sst" && e.file_size() > size) {
      size = e.file_size();
      largest = e.path();
    }
  }
  ASSERT_FALSE(largest.empty()) << "no SST in " << store;
  std::fstream f(largest, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(size / 2));
  f.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
  ASSERT_TRUE(f.good());
}

// Overwrites 8 bytes at 10, 30, 50 and 70% of every chunk SST of `store`
// (the large ones; the small ones hold the index and manifests, whose
// damage leaves the store unopenable, another matter): its data blocks
// (RocksDB keeps index and footer at the end), so chunks of every kind,
// the frozen reference model's included, are damaged.
void DamageEverySst(const fs::path& store) {
  int files = 0;
  for (const auto& e : fs::directory_iterator(store)) {
    if (e.path().extension() != ".sst" || e.file_size() < (256u << 10)) {
      continue;
    }
    const uintmax_t size = e.file_size();
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    for (int pct : {10, 30, 50, 70}) {
      f.seekp(static_cast<std::streamoff>(size * pct / 100));
      f.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
    }
    ASSERT_TRUE(f.good()) << e.path();
    ++files;
  }
  ASSERT_GT(files, 0) << "no SST in " << store;
}

TEST(HyctlDamagedCopyTest, ReadersTakeTheReplicaAndFailOnlyWithoutOne) {
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("hyctl-damaged-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string run = (dir / "run").string();
  CmdResult train = RunCommand(
      Hyctl() + "train --nproc 2 --iterations 2 --store " + run +
      " --set trainer.sft_steps=1 --set checkpoint.save_every=2");
  ASSERT_EQ(train.code, 0) << train.err;
  ASSERT_TRUE(fs::exists(dir / "run/node-0/replica-1")) << "no replica";
  CmdResult before = RunCommand(Hyctl() + "restore " + run +
                                " --layout replicated --rank 0 --out " +
                                (dir / "before").string());
  ASSERT_EQ(before.code, 0) << before.err;

  FlipBytes(dir / "run/node-1/store");
  CmdResult verify = RunCommand(Hyctl() + "verify " + run + "/node-1/store");
  EXPECT_EQ(verify.code, 3) << verify.out << verify.err;  // Really damaged.

  CmdResult after = RunCommand(Hyctl() + "restore " + run +
                               " --layout replicated --rank 0 --out " +
                               (dir / "after").string());
  ASSERT_EQ(after.code, 0) << after.err;
  EXPECT_NE(after.err.find("is damaged"), std::string::npos) << after.err;
  EXPECT_NE(after.err.find("replica"), std::string::npos) << after.err;
  EXPECT_EQ(Slurp(dir / "after/rank-0.safetensors"),
            Slurp(dir / "before/rank-0.safetensors"));
  CmdResult hf = RunCommand(Hyctl() + "export-hf " + run + " " +
                            (dir / "hf").string());
  EXPECT_EQ(hf.code, 0) << hf.err;

  FlipBytes(dir / "run/node-0/replica-1");  // Now no intact copy is left.
  CmdResult lost = RunCommand(Hyctl() + "restore " + run +
                              " --layout replicated --rank 0 --out " +
                              (dir / "lost").string());
  EXPECT_EQ(lost.code, 3) << lost.out << lost.err;
  EXPECT_NE(lost.err.find("DataLoss"), std::string::npos) << lost.err;
  fs::remove_all(dir);
}

// Issue 34's scenario 1: a resumed run whose primary store holds damaged
// chunks keeps checkpointing (its saves read chunks back before reusing
// them and write damaged ones again), and once retention has dropped the
// old versions the store verifies clean.
TEST(HyctlDamagedCopyTest, ResumedRunKeepsCheckpointingOverDamage) {
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("hyctl-damaged-resume-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string run = (dir / "run").string();
  const std::string flags =
      " --nproc 2 --set trainer.sft_steps=2 --set rollout.batch_size=16 "
      "--set actor.ppo_mini_batch_size=8 --set checkpoint.save_every=4";
  CmdResult train = RunCommand(Hyctl() + "train --iterations 12 --store " +
                               run + flags);
  ASSERT_EQ(train.code, 0) << train.err;
  DamageEverySst(dir / "run/node-1/store");
  ASSERT_EQ(RunCommand(Hyctl() + "verify " + run + "/node-1/store").code, 3);

  CmdResult resumed =
      RunCommand(Hyctl() + "train --resume " + run + " --iterations 20");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(resumed.err.find("giving up"), std::string::npos) << resumed.err;
  CmdResult inspect = RunCommand(Hyctl() + "inspect " + run);
  EXPECT_NE(inspect.out.find("recoverable: step 20"), std::string::npos)
      << inspect.out;
  // keep_last 2: steps 16 and 20 remain, written over the damage.
  CmdResult verify = RunCommand(Hyctl() + "verify " + run + "/node-1/store");
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hy::cli
