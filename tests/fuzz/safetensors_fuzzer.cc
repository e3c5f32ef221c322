// libFuzzer target for hy's readers of Hugging Face model files: what
// hyctl import, --model and the exporter's round trip do with a file off
// the internet. The first input byte picks a mode:
//   0: the rest as a whole .safetensors file (ParseSafetensors): a layout
//      it accepts must describe the file exactly (tensors in data order,
//      back to back, each of its dtype's size times its element count,
//      ending at the file's end);
//   1: the rest as a model.safetensors.index.json (ParseSafetensorsIndex):
//      every file it accepts is a plain name in the index's directory.
// Any crash, sanitizer report or __builtin_trap() is a finding.

#include <cstdint>
#include <string_view>

#include "hy/statestore/safetensors.h"

namespace {

void CheckFile(const uint8_t* data, size_t size) {
  auto layout = hy::statestore::ParseSafetensors(hy::ConstBytes(data, size));
  if (!layout.ok()) {
    if (!layout.status().IsDataLoss()) __builtin_trap();
    return;
  }
  uint64_t at = layout->data_offset();
  if (at > size) __builtin_trap();
  for (const auto& t : layout->tensors) {
    auto n = t.meta.NumElements();
    if (!n.ok() || t.data_begin + layout->data_offset() != at ||
        t.data_end < t.data_begin ||
        t.byte_size() != static_cast<uint64_t>(*n) * hy::DTypeSize(t.meta.dtype)) {
      __builtin_trap();
    }
    at += t.byte_size();
  }
  if (at != size) __builtin_trap();
}

void CheckIndex(const uint8_t* data, size_t size) {
  auto map = hy::statestore::ParseSafetensorsIndex(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!map.ok()) {
    if (!map.status().IsDataLoss()) __builtin_trap();
    return;
  }
  for (const auto& [name, file] : *map) {
    if (name.empty() || file.empty() || file == "." || file == ".." ||
        file.find('/') != std::string::npos ||
        file.find('\\') != std::string::npos ||
        file.find('\0') != std::string::npos) {
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] % 2 == 0) {
    CheckFile(data + 1, size - 1);
  } else {
    CheckIndex(data + 1, size - 1);
  }
  return 0;
}
