// What a killed engine leaves in /dev/shm, with real processes: a process
// group (a leader and its child, as vLLM's server and engine core) maps
// segments, one of them shared with a process outside the group; once the
// group is killed, only its own prefixed segments nobody maps any more are
// unlinked.

#include "hy/launcher/shm_segments.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/temp_dir.h"

namespace hy::launcher {
namespace {

namespace fs = std::filesystem;

// Maps each of `names` under dir (MAP_SHARED, one page each).
void MapAll(const std::string& dir, const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    const int fd = open((dir + "/" + n).c_str(), O_RDWR);
    if (fd < 0) _exit(3);
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) _exit(4);
    close(fd);
  }
}

// Forks a process that maps `names` (and, if `own_group`, starts a group
// of its own with a child mapping `child_names`), writes one byte to a
// pipe when all are mapped, and sleeps. Returns its pid once ready.
pid_t Spawn(const std::string& dir, const std::vector<std::string>& names,
            bool own_group, const std::vector<std::string>& child_names) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (own_group) setpgid(0, 0);
    MapAll(dir, names);
    if (!child_names.empty()) {
      int cfds[2];
      if (pipe(cfds) != 0) _exit(5);
      if (fork() == 0) {
        MapAll(dir, child_names);
        char c = 1;
        if (write(cfds[1], &c, 1) != 1) _exit(6);
        for (;;) pause();
      }
      char c;
      if (read(cfds[0], &c, 1) != 1) _exit(7);
    }
    char c = 1;
    if (write(fds[1], &c, 1) != 1) _exit(8);
    for (;;) pause();
  }
  close(fds[1]);
  char c = 0;
  EXPECT_EQ(read(fds[0], &c, 1), 1);
  close(fds[0]);
  return pid;
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(ShmSegmentsTest, ReclaimsWhatAKilledGroupLeftAndNothingElse) {
  TempDir dir;
  const std::string d = dir.path();
  for (const char* n : {"psm_leader", "sem.mp-child", "psm_shared",
                        "hy-weights-run", "psm_unmapped"}) {
    std::ofstream(d + "/" + n) << std::string(4096, 'x');
  }
  // The outsider (its parent's group) shares one segment with the group.
  const pid_t outsider = Spawn(d, {"psm_shared"}, false, {});
  const pid_t leader = Spawn(d, {"psm_leader", "psm_shared", "hy-weights-run"},
                             true, {"sem.mp-child", "psm_shared"});

  // The group's prefixed segments, the child's too; not the weight file,
  // not one nobody maps, not what the test process's group maps.
  const std::set<std::string> seen = GroupShmSegments(leader, d);
  EXPECT_EQ(seen, (std::set<std::string>{"psm_leader", "psm_shared",
                                         "sem.mp-child"}));
  EXPECT_TRUE(GroupShmSegments(getpgrp(), d).count("psm_leader") == 0);

  // While the group lives, nothing it maps is unlinked.
  EXPECT_TRUE(ReclaimShmSegments(seen, d).empty());
  EXPECT_FALSE(WaitGroupGone(leader, std::chrono::milliseconds(50)));

  ASSERT_EQ(kill(-leader, SIGKILL), 0);
  ASSERT_EQ(waitpid(leader, nullptr, 0), leader);
  // The child is reparented; a zombie no one reaps counts as gone.
  ASSERT_TRUE(WaitGroupGone(leader, std::chrono::seconds(10)));
  EXPECT_EQ(Sorted(ReclaimShmSegments(seen, d)),
            (std::vector<std::string>{"psm_leader", "sem.mp-child"}));
  EXPECT_FALSE(fs::exists(d + "/psm_leader"));
  EXPECT_FALSE(fs::exists(d + "/sem.mp-child"));
  EXPECT_TRUE(fs::exists(d + "/psm_shared"));  // The outsider maps it.
  EXPECT_TRUE(fs::exists(d + "/hy-weights-run"));
  EXPECT_TRUE(fs::exists(d + "/psm_unmapped"));

  kill(outsider, SIGKILL);
  ASSERT_EQ(waitpid(outsider, nullptr, 0), outsider);
  // Gone names are neither errors nor listed again.
  EXPECT_EQ(ReclaimShmSegments(seen, d),
            std::vector<std::string>{"psm_shared"});
  EXPECT_TRUE(ReclaimShmSegments(seen, d).empty());
}

TEST(ShmSegmentsTest, AGroupThatDoesNotExistHasNoSegmentsAndIsGone) {
  TempDir dir;
  // A pid far above any pid_max in use.
  EXPECT_TRUE(GroupShmSegments(1 << 30, dir.path()).empty());
  EXPECT_TRUE(WaitGroupGone(1 << 30, std::chrono::milliseconds(0)));
}

}  // namespace
}  // namespace hy::launcher
