#include "hy/common/process_memory.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace hy {
namespace {

// A "Field:   N kB" line of /proc/self/status, in bytes.
int64_t StatusBytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') {
      return std::atoll(line.c_str() + n + 1) * 1024;
    }
  }
  return 0;
}

}  // namespace

int64_t ResidentBytes() { return StatusBytes("VmRSS"); }

int64_t PeakResidentBytes() { return StatusBytes("VmHWM"); }

bool ResetPeakResident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace hy
