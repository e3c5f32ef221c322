// A damaged chunk in one copy of a run's part (8 bytes flipped in a primary
// store's SST file, as a failing disk does): the offline readers (restore,
// export, export-hf) read the replica instead, say so and give the same
// bytes; with every copy damaged they fail with DataLoss (exit 3), naming
// the copies. inspect flags damaged copies, repair writes them again from
// an intact one, and after a recovery or a resize retention leaves no
// superseded, damaged or departed store behind (issue 34's scenarios).

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli/hyctl_run.h"

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

// The chunk addresses (hex) of `step` in the store at `store`.
std::set<std::string> ChunksOf(const std::string& store, uint64_t step) {
  std::set<std::string> out;
  CmdResult r = RunCommand(Hyctl() + "inspect " + store + " --step " +
                           std::to_string(step) + " -o json");
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const auto& t : j["tensors"]) {
    for (const auto& s : t["shards"]) {
      for (const auto& c : s["chunks"]) out.insert(c["address"]);
    }
  }
  return out;
}

// Overwrites 8 bytes of the stored value of chunk `hex` in the SST file of
// `store` that holds it (found by its key: the address follows the epoch),
// as a failing disk would.
void FlipChunk(const fs::path& store, const std::string& hex) {
  std::string address;
  for (size_t i = 0; i < hex.size(); i += 2) {
    address.push_back(
        static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  // Keys share a prefix with their predecessor: look for the address's
  // tail, which a key always spells out. The chunk index (small SSTs of
  // the meta column family) names it too: take the largest file.
  const std::string tail = address.substr(4);
  fs::path file;
  size_t at = std::string::npos;
  uintmax_t size = 0;
  for (const auto& e : fs::directory_iterator(store)) {
    if (e.path().extension() != ".sst" || e.file_size() <= size) continue;
    const size_t found = Slurp(e.path()).find(tail);
    if (found == std::string::npos) continue;
    file = e.path();
    at = found;
    size = e.file_size();
  }
  ASSERT_FALSE(file.empty()) << "no SST of " << store << " holds " << hex;
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  // The value starts after the key: past its 72-byte chunk header.
  f.seekp(static_cast<std::streamoff>(at + tail.size() + 100));
  f.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
  ASSERT_TRUE(f.good());
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
  // The save that met the damage said so, naming the store.
  EXPECT_NE(resumed.err.find("node-1/store: chunk "), std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.err.find("quarantined"), std::string::npos) << resumed.err;
  CmdResult inspect = RunCommand(Hyctl() + "inspect " + run);
  EXPECT_NE(inspect.out.find("recoverable: step 20"), std::string::npos)
      << inspect.out;
  // keep_last 2: steps 16 and 20 remain, written over the damage.
  CmdResult verify = RunCommand(Hyctl() + "verify " + run + "/node-1/store");
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
  fs::remove_all(dir);
}

// inspect flags a damaged copy with its first bad chunk and counts it out;
// repair writes it again from the replica, after which everything verifies.
TEST(HyctlDamagedCopyTest, InspectFlagsAndRepairRewritesADamagedCopy) {
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("hyctl-repair-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string run = (dir / "run").string();
  CmdResult train =
      RunCommand(Hyctl() + "train --nproc 2 --iterations 2 --store " + run +
                 " --set trainer.sft_steps=1 --set checkpoint.save_every=2");
  ASSERT_EQ(train.code, 0) << train.err;
  FlipBytes(dir / "run/node-1/store");

  CmdResult inspect = RunCommand(Hyctl() + "inspect " + run);
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("primary on node 1 (committed, damaged: chunk"),
            std::string::npos)
      << inspect.out;
  EXPECT_NE(inspect.out.find("1 damaged cop"), std::string::npos)
      << inspect.out;
  EXPECT_NE(inspect.out.find("recoverable: step 2"), std::string::npos)
      << inspect.out;
  // --quick reads no chunk, so it cannot tell.
  CmdResult quick = RunCommand(Hyctl() + "inspect --quick " + run);
  EXPECT_EQ(quick.out.find("damaged"), std::string::npos) << quick.out;

  CmdResult repair = RunCommand(Hyctl() + "repair " + run);
  EXPECT_EQ(repair.code, 0) << repair.out << repair.err;
  EXPECT_NE(repair.out.find("node-1/store: "), std::string::npos) << repair.out;
  EXPECT_NE(repair.out.find("0 without an intact copy"), std::string::npos)
      << repair.out;
  CmdResult verify = RunCommand(Hyctl() + "verify " + run);
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
  CmdResult restore = RunCommand(Hyctl() + "restore " + run +
                                 " --layout replicated --rank 0 --out " +
                                 (dir / "out").string());
  EXPECT_EQ(restore.code, 0) << restore.err;
  EXPECT_EQ(restore.err.find("damaged"), std::string::npos) << restore.err;
  fs::remove_all(dir);
}

// Issue 34's scenario 2: a 4-rank run loses node 2 and node 2's replica
// (on node 3) is damaged in step 12 only; resumed on 3 ranks, recovery
// passes over step 12 and recovers step 8. Once the new generation's first
// steps are replicated, retention removes generation 0 everywhere and the
// stale replica store with it: the run root verifies clean, and inspect
// lists no lost version.
TEST(HyctlDamagedCopyTest, RecoveryPastADamagedReplicaLeavesACleanRoot) {
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("hyctl-damaged-gen-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string run = (dir / "run").string();
  const std::string flags =
      " --set trainer.sft_steps=2 --set rollout.batch_size=16 "
      "--set actor.ppo_mini_batch_size=8 --set checkpoint.save_every=4";
  CmdResult train = RunCommand(Hyctl() +
                               "train --nproc 4 --iterations 12 "
                               "--store " +
                               run + flags);
  ASSERT_EQ(train.code, 0) << train.err;
  const std::string replica = run + "/node-3/replica-2";
  std::set<std::string> only12 = ChunksOf(replica, 12);
  for (const std::string& a : ChunksOf(replica, 8)) only12.erase(a);
  ASSERT_FALSE(only12.empty());
  fs::remove_all(dir / "run/node-2");
  FlipChunk(replica, *only12.begin());

  CmdResult before = RunCommand(Hyctl() + "inspect " + run);
  ASSERT_EQ(before.code, 0) << before.err;
  EXPECT_NE(before.out.find("(committed, damaged: chunk"), std::string::npos)
      << before.out;
  EXPECT_NE(before.out.find("recoverable: step 8"), std::string::npos)
      << before.out;

  CmdResult resumed = RunCommand(Hyctl() + "train --resume " + run +
                                 " --nproc 3 --iterations 20" + flags);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("passed over step 12"), std::string::npos)
      << resumed.err;
  CmdResult after = RunCommand(Hyctl() + "inspect " + run);
  ASSERT_EQ(after.code, 0) << after.err;
  EXPECT_NE(after.out.find("recoverable: step 20"), std::string::npos)
      << after.out;
  EXPECT_EQ(after.out.find(" is lost"), std::string::npos) << after.out;
  EXPECT_EQ(after.out.find("no: "), std::string::npos) << after.out;
  EXPECT_EQ(after.out.find("damaged: chunk"), std::string::npos) << after.out;
  EXPECT_FALSE(fs::exists(replica));  // Stale, superseded, removed.
  CmdResult verify = RunCommand(Hyctl() + "verify " + run);
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
  CmdResult gc = RunCommand(Hyctl() + "gc " + run + " --keep 2");
  EXPECT_EQ(gc.code, 0) << gc.out << gc.err;
  EXPECT_EQ(RunCommand(Hyctl() + "verify " + run).code, 0);
  fs::remove_all(dir);
}

// Issue 34's scenario 3: after a resize from 2 to 3 ranks, keep_last
// removes the old world's versions from every store, the replica store the
// new ring no longer writes included; what is gone is reported as not
// found (exit 2), never as DataLoss.
TEST(HyctlDamagedCopyTest, ResizeRetiresTheOldWorldEverywhere) {
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("hyctl-resize-gc-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string run = (dir / "run").string();
  const std::string flags =
      " --set trainer.sft_steps=2 --set rollout.batch_size=16 "
      "--set actor.ppo_mini_batch_size=8 --set checkpoint.save_every=4";
  CmdResult train = RunCommand(Hyctl() +
                               "train --nproc 2 --iterations 12 "
                               "--store " +
                               run + flags);
  ASSERT_EQ(train.code, 0) << train.err;
  ASSERT_TRUE(fs::exists(dir / "run/node-0/replica-1"));
  CmdResult resumed = RunCommand(Hyctl() + "train --resume " + run +
                                 " --nproc 3 --iterations 20" + flags);
  ASSERT_EQ(resumed.code, 0) << resumed.err;

  EXPECT_FALSE(fs::exists(dir / "run/node-0/replica-1"));
  CmdResult inspect = RunCommand(Hyctl() + "inspect -o json " + run);
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  const auto j = nlohmann::json::parse(inspect.out);
  EXPECT_EQ(j["recover_step"], 20);
  for (const auto& v : j["versions"]) {
    EXPECT_EQ(v["generation"], j["live_generation"]) << v.dump();
    EXPECT_EQ(v["world_size"], 3) << v.dump();
  }
  CmdResult restore = RunCommand(Hyctl() + "restore " + run +
                                 " --step 8 --layout replicated --rank 0 "
                                 "--out " +
                                 (dir / "out").string());
  EXPECT_EQ(restore.code, 2) << restore.err;
  EXPECT_EQ(RunCommand(Hyctl() + "verify " + run).code, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hy::cli
