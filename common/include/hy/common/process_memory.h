// This process's memory as Linux reports it in /proc/self/status: the
// resident set now and its peak (VmRSS, VmHWM), and resetting the peak to
// the current RSS (/proc/self/clear_refs "5"), so a phase's peak can be
// measured. Thread-safe (reads and writes /proc only).

#ifndef HY_COMMON_PROCESS_MEMORY_H_
#define HY_COMMON_PROCESS_MEMORY_H_

#include <cstdint>

namespace hy {

// Resident set size in bytes; 0 if /proc cannot be read.
int64_t ResidentBytes();
// Peak resident set size in bytes since the process started or the last
// successful ResetPeakResident; 0 if /proc cannot be read.
int64_t PeakResidentBytes();
// Sets the peak to the current RSS. Returns false where the kernel does not
// allow it (then PeakResidentBytes keeps counting from the start).
bool ResetPeakResident();

}  // namespace hy

#endif  // HY_COMMON_PROCESS_MEMORY_H_
