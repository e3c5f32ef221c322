#include "hy/metrics/file_sd.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace hy::metrics {
namespace {

using nlohmann::json;

Status Errno(const std::string& what) {
  return Status::IOError(what + ": " + std::strerror(errno));
}

// The rank label of a target group, or -1.
int RankOf(const json& group) {
  if (!group.is_object() || !group.contains("labels")) return -1;
  const json& labels = group["labels"];
  if (!labels.is_object() || !labels.contains("rank") ||
      !labels["rank"].is_string()) {
    return -1;
  }
  try {
    return std::stoi(labels["rank"].get<std::string>());
  } catch (const std::exception&) {
    return -1;
  }
}

class FileLock {
 public:
  explicit FileLock(const std::string& path)
      : fd_(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {}
  ~FileLock() {
    if (fd_ >= 0) close(fd_);  // Releases the flock.
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool Lock() {
    if (fd_ < 0) return false;
    while (flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) return false;
    }
    return true;
  }

 private:
  int fd_;
};

}  // namespace

Status SetFileSdTarget(const std::string& path, int rank, int world_size,
                       const std::string& target,
                       const prometheus::Labels& labels) {
  FileLock lock(path + ".lock");
  if (!lock.Lock()) return Errno("cannot lock " + path + ".lock");

  json groups = json::array();
  if (std::ifstream in(path); in) {
    std::stringstream text;
    text << in.rdbuf();
    json old = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (old.is_array()) {
      for (json& g : old) {
        const int r = RankOf(g);
        if (r >= 0 && r != rank && r < world_size) groups.push_back(g);
      }
    }
  }
  json group_labels = json::object();
  for (const auto& [k, v] : labels) group_labels[k] = v;
  group_labels["rank"] = std::to_string(rank);
  groups.push_back({{"targets", {target}}, {"labels", group_labels}});
  std::sort(groups.begin(), groups.end(), [](const json& a, const json& b) {
    return RankOf(a) < RankOf(b);
  });

  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << groups.dump(2) << "\n";
    out.flush();
    if (!out) return Errno("cannot write " + tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const Status s = Errno("cannot rename " + tmp + " to " + path);
    unlink(tmp.c_str());
    return s;
  }
  return Status::OK();
}

}  // namespace hy::metrics
