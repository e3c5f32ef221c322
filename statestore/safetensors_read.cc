// The safetensors header parser and SafetensorsReader (see safetensors.h).

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>

#include "hy/statestore/safetensors.h"
#include "safetensors_internal.h"

namespace hy::statestore {

namespace {

using internal::ErrnoStatus;
using internal::Quote;
using Json = nlohmann::json;

// Deep enough for any header (the schema needs 3 levels), shallow enough
// that no nesting can exhaust memory.
constexpr int kMaxJsonDepth = 32;

// Thrown by the parse callback to stop parsing; caught at the parse site.
struct HeaderRejected {
  std::string message;
};

// Parses `text` into a Json value; rejects duplicate keys in any object (the
// DOM would keep only the last) and nesting deeper than kMaxJsonDepth.
Result<Json> ParseHeaderJson(std::string_view text) {
  std::vector<std::set<std::string>> keys;  // One set per open object.
  auto callback = [&keys](int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) {
          throw HeaderRejected{"header JSON nests deeper than " +
                               std::to_string(kMaxJsonDepth) + " levels"};
        }
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        keys.pop_back();
        break;
      case Json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!keys.back().insert(key).second) {
          throw HeaderRejected{"header has the key " + Quote(key) + " twice"};
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const HeaderRejected& e) {
    return Status::DataLoss(e.message);
  } catch (const Json::exception& e) {
    return Status::DataLoss(std::string("header is not valid JSON: ") +
                            e.what());
  }
}

// A non-negative JSON integer, or nullopt.
std::optional<uint64_t> AsUnsigned(const Json& j) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(j.get<int64_t>());
  }
  return std::nullopt;
}

// Reads one tensor entry of the header. `data_size` is the data buffer's.
Result<SafetensorsTensor> ParseTensorEntry(const std::string& name,
                                           const Json& entry,
                                           uint64_t data_size) {
  const std::string t = "tensor " + Quote(name);
  if (name.empty()) return Status::DataLoss("header has a tensor named ''");
  if (!entry.is_object()) return Status::DataLoss(t + " is not an object");
  SafetensorsTensor out;
  out.meta.name = name;

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return Status::DataLoss(t + " has no \"dtype\" string");
  }
  const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
  Result<DType> dtype = DTypeFromSafetensorsName(dtype_name);
  if (!dtype.ok()) {
    return Status::DataLoss(t + " has unknown or unsupported dtype " +
                            Quote(dtype_name));
  }
  out.meta.dtype = *dtype;

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return Status::DataLoss(t + " has no \"shape\" array");
  }
  uint64_t numel = 1;
  bool overflow = false;
  for (const Json& d : *shape_it) {
    std::optional<uint64_t> dim = AsUnsigned(d);
    if (!dim || *dim > uint64_t{std::numeric_limits<int64_t>::max()}) {
      return Status::DataLoss(t + " has shape entry " + d.dump() +
                              ", not a non-negative integer");
    }
    out.meta.shape.push_back(static_cast<int64_t>(*dim));
    if (*dim != 0 && numel > std::numeric_limits<uint64_t>::max() / *dim) {
      overflow = true;
    }
    numel *= *dim;
  }
  const uint64_t es = DTypeSize(out.meta.dtype);
  if (overflow || numel > std::numeric_limits<uint64_t>::max() / es) {
    return Status::DataLoss(t + " has a shape whose byte size overflows");
  }

  auto off_it = entry.find("data_offsets");
  std::optional<uint64_t> begin, end;
  if (off_it != entry.end() && off_it->is_array() && off_it->size() == 2) {
    begin = AsUnsigned((*off_it)[0]);
    end = AsUnsigned((*off_it)[1]);
  }
  if (!begin || !end) {
    return Status::DataLoss(t +
                            " has no \"data_offsets\" pair of "
                            "non-negative integers");
  }
  const std::string range =
      "[" + std::to_string(*begin) + ", " + std::to_string(*end) + "]";
  if (*end < *begin) {
    return Status::DataLoss(t + " has data_offsets " + range +
                            " ending before they begin");
  }
  if (*end > data_size) {
    return Status::DataLoss(
        t + " has data_offsets " + range + " past the end of the " +
        std::to_string(data_size) + "-byte data buffer (truncated file?)");
  }
  if (*end - *begin != numel * es) {
    return Status::DataLoss(t + " has data_offsets " + range + " (" +
                            std::to_string(*end - *begin) + " bytes) but " +
                            out.meta.DebugString() + " needs " +
                            std::to_string(numel * es));
  }
  out.data_begin = *begin;
  out.data_end = *end;
  return out;
}

Status ParseMetadata(const Json& j, std::map<std::string, std::string>* out) {
  if (j.is_null()) return Status::OK();  // The reference accepts null.
  if (!j.is_object()) {
    return Status::DataLoss("header's \"__metadata__\" is not an object");
  }
  for (const auto& [key, value] : j.items()) {
    if (!value.is_string()) {
      return Status::DataLoss("header's \"__metadata__\" value for " +
                              Quote(key) + " is not a string");
    }
    (*out)[key] = value.get<std::string>();
  }
  return Status::OK();
}

}  // namespace

Result<SafetensorsLayout> ParseSafetensors(ConstBytes file) {
  if (file.size() < 8) {
    return Status::DataLoss("safetensors file is " +
                            std::to_string(file.size()) +
                            " bytes, too short for the 8-byte header length");
  }
  SafetensorsLayout layout;
  for (int i = 7; i >= 0; --i) {
    layout.header_size = (layout.header_size << 8) | file[i];
  }
  const uint64_t n = layout.header_size;
  if (n > kSafetensorsMaxHeaderSize) {
    return Status::DataLoss("header length " + std::to_string(n) +
                            " exceeds the limit of " +
                            std::to_string(kSafetensorsMaxHeaderSize));
  }
  if (n > file.size() - 8) {
    return Status::DataLoss(
        "header length " + std::to_string(n) + " runs past the end of the " +
        std::to_string(file.size()) + "-byte file (truncated file?)");
  }
  const std::string_view text = file.subspan(8, n).AsStringView();
  if (text.empty() || text[0] != '{') {
    return Status::DataLoss("header does not start with '{'");
  }
  // JSON has no raw NUL bytes, but nlohmann stops parsing at one.
  if (text.find('\0') != std::string_view::npos) {
    return Status::DataLoss("header contains a NUL byte");
  }
  HY_ASSIGN_OR_RETURN(Json header, ParseHeaderJson(text));
  if (!header.is_object()) {
    return Status::DataLoss("header is not a JSON object");
  }
  const uint64_t data_size = file.size() - 8 - n;
  for (const auto& [key, value] : header.items()) {
    if (key == kSafetensorsMetadataKey) {
      HY_RETURN_IF_ERROR(ParseMetadata(value, &layout.metadata));
      continue;
    }
    HY_ASSIGN_OR_RETURN(SafetensorsTensor tensor,
                        ParseTensorEntry(key, value, data_size));
    layout.tensors.push_back(std::move(tensor));
  }
  std::sort(layout.tensors.begin(), layout.tensors.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
              return std::tie(a.data_begin, a.data_end, a.meta.name) <
                     std::tie(b.data_begin, b.data_end, b.meta.name);
            });
  uint64_t covered = 0;  // Everything before is some tensor's.
  const SafetensorsTensor* prev = nullptr;
  for (const SafetensorsTensor& t : layout.tensors) {
    if (t.data_begin < covered) {
      return Status::DataLoss("tensor " + Quote(t.meta.name) +
                              " overlaps tensor " + Quote(prev->meta.name) +
                              " in the data buffer");
    }
    if (t.data_begin > covered) {
      return Status::DataLoss("data buffer has a hole of " +
                              std::to_string(t.data_begin - covered) +
                              " bytes before tensor " + Quote(t.meta.name));
    }
    covered = t.data_end;
    prev = &t;
  }
  if (covered != data_size) {
    return Status::DataLoss("the last " + std::to_string(data_size - covered) +
                            " bytes of the data buffer belong to no tensor");
  }
  return layout;
}

// ---- SafetensorsReader ------------------------------------------------------

Result<std::map<std::string, std::string>> ParseSafetensorsIndex(
    std::string_view json, const std::string& where) {
  const Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  auto map = j.is_object() ? j.find("weight_map") : j.end();
  if (j.is_discarded() || map == j.end() || !map->is_object()) {
    return Status::DataLoss(where + ": not JSON with a weight_map object");
  }
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : map->items()) {
    if (name.empty()) {
      return Status::DataLoss(where + ": weight_map has an empty tensor name");
    }
    if (!file.is_string()) {
      return Status::DataLoss(where + ": weight_map." + name +
                              " is not a file name");
    }
    const std::string f = file.get<std::string>();
    if (f.empty() || f == "." || f == ".." ||
        f.find_first_of(std::string("/\\\0", 3)) != std::string::npos) {
      return Status::DataLoss(where + ": weight_map." + name + " is " +
                              internal::Quote(f) +
                              ", not a file name in the index's directory");
    }
    out[name] = f;
  }
  return out;
}

Result<std::unique_ptr<SafetensorsReader>> SafetensorsReader::Open(
    const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open " + path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot stat " + path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::IOError(path + " is not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  void* base = nullptr;
  if (size > 0) {
    base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Status::IOError("cannot map " + path + ": " + std::strerror(err));
    }
  }
  ::close(fd);  // The mapping keeps the file.
  const uint8_t* bytes = static_cast<const uint8_t*>(base);
  Result<SafetensorsLayout> layout = ParseSafetensors(ConstBytes(bytes, size));
  if (!layout.ok()) {
    if (base != nullptr) ::munmap(base, size);
    return layout.status().WithContext(path);
  }
  return std::unique_ptr<SafetensorsReader>(
      new SafetensorsReader(bytes, size, std::move(layout).value()));
}

SafetensorsReader::SafetensorsReader(const uint8_t* base, uint64_t size,
                                     SafetensorsLayout layout)
    : base_(base), size_(size), layout_(std::move(layout)) {
  for (size_t i = 0; i < layout_.tensors.size(); ++i) {
    index_.emplace(layout_.tensors[i].meta.name, i);
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (base_ != nullptr) {
    ::munmap(const_cast<uint8_t*>(base_), size_);
  }
}

const SafetensorsTensor* SafetensorsReader::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &layout_.tensors[it->second];
}

Result<ConstBytes> SafetensorsReader::TensorData(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    return Status::NotFound("no tensor " + Quote(name) + " in the file");
  }
  return TensorDataAt(it->second);
}

ConstBytes SafetensorsReader::TensorDataAt(size_t index) const {
  const SafetensorsTensor& t = layout_.tensors[index];
  return ConstBytes(base_ + layout_.data_offset() + t.data_begin,
                    t.byte_size());
}

}  // namespace hy::statestore
