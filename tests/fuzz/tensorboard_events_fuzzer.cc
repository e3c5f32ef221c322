// libFuzzer target for hy's TensorBoard events reader (ParseEventFile, what
// hyctl plot and the run readers do with a run's tfevents files, which a
// killed writer may leave cut short and a disk may damage). The input is
// the file. An accepted file must account for every byte: its records and,
// after them, a tail too short to be one; a rejected one is DataLoss.
// Any crash, sanitizer report or __builtin_trap() is a finding.

#include <cstdint>
#include <string_view>

#include "hy/metrics/tensorboard/event_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = hy::metrics::tensorboard::ParseEventFile(bytes, "fuzz");
  if (!file.ok()) {
    if (!file.status().IsDataLoss()) __builtin_trap();
    return 0;
  }
  if (file->truncated_tail_bytes < 0 ||
      static_cast<size_t>(file->truncated_tail_bytes) > size ||
      static_cast<int64_t>(file->events.size()) > file->records ||
      // A record is at least 16 bytes of framing.
      static_cast<size_t>(file->records) * 16 +
              static_cast<size_t>(file->truncated_tail_bytes) >
          size) {
    __builtin_trap();
  }
  return 0;
}
