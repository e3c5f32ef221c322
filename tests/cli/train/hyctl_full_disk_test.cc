// hyctl train with its run root on a disk that fills (a 48 MB tmpfs in a
// user and mount namespace the test makes with unshare(1)): each failed
// checkpoint is said once, in words naming the run root, its free space
// and the newest saved step, counted in -o json; after
// checkpoint.max_consecutive_failures the run stops with exit 74 and no
// restart (no abort, no "lost a node"); the run root verifies, holds no
// partial file, and --resume continues once there is room.

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli/hyctl_run.h"
#include "testing/temp_dir.h"

namespace hy::cli {
namespace {

using hy::testing::CmdResult;
using hy::testing::JsonLines;
using hy::testing::RunCommand;
using hy::TempDir;

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(FullDiskTest, StopsWithOneClearMessagePerFailureAndResumesWithRoom) {
  TempDir tmp;
  const std::string t = tmp.path();
  const std::string hyctl = std::string(hy::testing::kCleanEnv) +
                            " timeout 300 " + HYCTL_PATH;
  // Everything that needs the small disk runs inside the namespace; what
  // the test reads afterwards is written outside it, under t.
  const std::string script =
      "mount -t tmpfs -o size=48m tmpfs " + t + "/disk || exit 90\n" +
      hyctl + " train --nproc 2 --iterations 60 --store " + t +
      "/disk/run --set checkpoint.save_every=2 -o json >" + t +
      "/out1 2>" + t + "/err1; echo $? >" + t + "/rc1\n" + hyctl +
      " verify " + t + "/disk/run >" + t + "/verify 2>&1; echo $? >" + t +
      "/rc2\n" + "find " + t + "/disk/run -name 'hy-ingest-*' | wc -l >" + t +
      "/leftovers\n" + "mount -o remount,size=400m " + t + "/disk\n" + hyctl +
      " train --resume " + t + "/disk/run --iterations 20 -o json >" + t +
      "/out3 2>" + t + "/err3; echo $? >" + t + "/rc3\n";
  {
    std::ofstream f(t + "/script.sh");
    f << script;
  }
  const CmdResult r = RunCommand("mkdir -p " + t + "/disk && unshare -rm sh " +
                                 t + "/script.sh");
  if (r.code != 0) {
    GTEST_SKIP() << "cannot mount a small disk here (unshare -rm, tmpfs): "
                 << r.err;
  }
  const std::string err1 = Slurp(t + "/err1");
  EXPECT_EQ(std::stoi(Slurp(t + "/rc1")), 74) << err1;
  // Said in words, once per failed checkpoint (the one in flight when the
  // run stops may fail too), never as a crash or a lost node.
  const int failures = Count(err1, "] checkpoint: step ");
  EXPECT_GE(failures, 3) << err1;
  EXPECT_LE(failures, 4) << err1;
  EXPECT_EQ(Count(err1, "not saved: no space left on " + t + "/disk/run ("),
            failures)
      << err1;
  EXPECT_NE(err1.find("newest saved step "), std::string::npos) << err1;
  EXPECT_EQ(Count(err1, "checkpoints failed in a row (checkpoint.on_failure: "
                        "stop"),
            1)
      << err1;
  EXPECT_NE(err1.find("checkpoints cannot be written"), std::string::npos)
      << err1;
  for (const char* bad :
       {"Assertion", "killed by signal", "restarting on", "lost no node"}) {
    EXPECT_EQ(err1.find(bad), std::string::npos) << bad << "\n" << err1;
  }
  // -o json counts them and names the cause.
  const auto lines = JsonLines(Slurp(t + "/out1"));
  ASSERT_FALSE(lines.empty());
  int64_t counted = 0, no_space = 0;
  for (const auto& j : lines) {
    counted = std::max<int64_t>(counted, j.value("checkpoint_failures", 0));
    if (j.value("checkpoint_failure_cause", "") == "no_space") ++no_space;
  }
  EXPECT_GE(counted, 3);
  EXPECT_EQ(no_space, counted);
  // What was saved is intact and clean.
  EXPECT_EQ(std::stoi(Slurp(t + "/rc2")), 0) << Slurp(t + "/verify");
  EXPECT_EQ(std::stoi(Slurp(t + "/leftovers")), 0);
  // With room again the run continues from its newest saved step.
  const std::string err3 = Slurp(t + "/err3");
  EXPECT_EQ(std::stoi(Slurp(t + "/rc3")), 0) << err3;
  EXPECT_NE(err3.find("checkpoint step 20"), std::string::npos) << err3;
}

}  // namespace
}  // namespace hy::cli
