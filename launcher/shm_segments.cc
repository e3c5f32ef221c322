#include "hy/launcher/shm_segments.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace hy::launcher {
namespace {

// Calls fn(pid) for every process in /proc.
template <typename Fn>
void ForEachProcess(Fn fn) {
  DIR* d = opendir("/proc");
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid > 0 && end != nullptr && *end == '\0') fn(static_cast<pid_t>(pid));
  }
  closedir(d);
}

// The process's group, or -1 if it is gone or a zombie.
pid_t LiveGroupOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  // "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  char state = 0;
  long ppid = 0, pgrp = 0;
  if (std::sscanf(stat.c_str() + close + 1, " %c %ld %ld", &state, &ppid,
                  &pgrp) != 3 ||
      state == 'Z' || state == 'X') {
    return -1;
  }
  return static_cast<pid_t>(pgrp);
}

// Calls fn(name) for each file directly under `dir` that the process maps
// (names still linked: a mapping of an unlinked file reads "(deleted)").
template <typename Fn>
void ForEachMappedIn(pid_t pid, const std::string& dir, Fn fn) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  const std::string want = dir + "/";
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(want);
    if (at == std::string::npos) continue;
    const std::string name = line.substr(at + want.size());
    if (name.empty() || name.find('/') != std::string::npos ||
        name.find(" (deleted)") != std::string::npos) {
      continue;
    }
    fn(name);
  }
}

bool HasPrefix(const std::string& name,
               const std::vector<std::string>& prefixes) {
  for (const std::string& p : prefixes) {
    if (name.compare(0, p.size(), p) == 0) return true;
  }
  return false;
}

}  // namespace

std::set<std::string> GroupShmSegments(
    pid_t pgid, const std::string& dir,
    const std::vector<std::string>& prefixes) {
  std::set<std::string> out;
  ForEachProcess([&](pid_t pid) {
    if (LiveGroupOf(pid) != pgid) return;
    ForEachMappedIn(pid, dir, [&](const std::string& name) {
      if (HasPrefix(name, prefixes)) out.insert(name);
    });
  });
  return out;
}

bool WaitGroupGone(pid_t pgid, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    bool any = false;
    ForEachProcess([&](pid_t pid) { any = any || LiveGroupOf(pid) == pgid; });
    if (!any) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<std::string> ReclaimShmSegments(const std::set<std::string>& names,
                                            const std::string& dir) {
  std::vector<std::string> out;
  if (names.empty()) return out;
  std::set<std::string> in_use;
  ForEachProcess([&](pid_t pid) {
    if (LiveGroupOf(pid) < 0) return;
    ForEachMappedIn(pid, dir, [&](const std::string& name) {
      if (names.count(name) > 0) in_use.insert(name);
    });
  });
  for (const std::string& name : names) {
    if (in_use.count(name) > 0) continue;
    if (unlink((dir + "/" + name).c_str()) == 0) out.push_back(name);
  }
  return out;
}

}  // namespace hy::launcher
