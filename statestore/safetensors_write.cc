// SafetensorsWriter and WriteSafetensors (see safetensors.h).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "hy/statestore/safetensors.h"
#include "safetensors_internal.h"

namespace hy::statestore {

namespace {

using internal::ErrnoStatus;
using internal::Quote;

constexpr size_t kWriteBufferSize = size_t{1} << 20;

// Position in the reference implementation's Dtype enum, which lists dtypes
// in increasing alignment; the writer sorts by it, descending.
int ReferenceDTypeRank(DType dtype) {
  static constexpr std::string_view kOrder[] = {
      "BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "I16", "U16", "F16",
      "BF16", "I32", "U32", "F32",     "F64",     "I64", "U64"};
  const auto* it =
      std::find(std::begin(kOrder), std::end(kOrder), SafetensorsName(dtype));
  return static_cast<int>(it - std::begin(kOrder));
}

// Computes the data order, offsets and the padded header text.
Result<std::pair<SafetensorsLayout, std::string>> PlanFile(
    std::vector<TensorMeta> metas,
    std::map<std::string, std::string> metadata) {
  SafetensorsLayout layout;
  std::set<std::string_view> names;
  for (const TensorMeta& m : metas) {
    HY_RETURN_IF_ERROR(m.Validate());
    if (m.name == kSafetensorsMetadataKey) {
      return Status::InvalidArgument("a tensor may not be named '" +
                                     std::string(kSafetensorsMetadataKey) +
                                     "'");
    }
    if (!names.insert(m.name).second) {
      return Status::InvalidArgument("tensor " + Quote(m.name) +
                                     " is declared twice");
    }
  }
  std::sort(metas.begin(), metas.end(),
            [](const TensorMeta& a, const TensorMeta& b) {
              const int ra = ReferenceDTypeRank(a.dtype);
              const int rb = ReferenceDTypeRank(b.dtype);
              return ra != rb ? ra > rb : a.name < b.name;
            });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    header[std::string(kSafetensorsMetadataKey)] = metadata;
  }
  uint64_t offset = 0;
  for (TensorMeta& m : metas) {
    const uint64_t size = static_cast<uint64_t>(*m.ByteSize());
    if (size > std::numeric_limits<uint64_t>::max() - offset) {
      return Status::InvalidArgument("total tensor size overflows");
    }
    SafetensorsTensor t{std::move(m), offset, offset + size};
    offset += size;
    header[t.meta.name] = {
        {"dtype", std::string(SafetensorsName(t.meta.dtype))},
        {"shape", t.meta.shape},
        {"data_offsets", {t.data_begin, t.data_end}}};
    layout.tensors.push_back(std::move(t));
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("cannot encode header: ") +
                                   e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kSafetensorsMaxHeaderSize) {
    return Status::InvalidArgument("header would be " +
                                   std::to_string(text.size()) +
                                   " bytes, over the limit of " +
                                   std::to_string(kSafetensorsMaxHeaderSize));
  }
  layout.header_size = text.size();
  layout.metadata = std::move(metadata);
  return std::make_pair(std::move(layout), std::move(text));
}

Status WriteAll(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot write " + path, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Result<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(
    const std::string& path, std::vector<TensorMeta> tensors,
    std::map<std::string, std::string> metadata) {
  HY_ASSIGN_OR_RETURN(auto plan,
                      PlanFile(std::move(tensors), std::move(metadata)));
  static std::atomic<uint64_t> counter{0};
  const std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." +
                           std::to_string(counter.fetch_add(1));
  const int fd =
      ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return ErrnoStatus("cannot create " + temp, errno);
  std::unique_ptr<SafetensorsWriter> writer(
      new SafetensorsWriter(path, temp, fd, std::move(plan.first)));
  uint8_t length[8];
  const uint64_t n = writer->layout_.header_size;
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(n >> (8 * i));
  HY_RETURN_IF_ERROR(writer->Write(ConstBytes(length, 8)));
  HY_RETURN_IF_ERROR(writer->Write(plan.second));
  return writer;
}

SafetensorsWriter::SafetensorsWriter(std::string path, std::string temp_path,
                                     int fd, SafetensorsLayout layout)
    : path_(std::move(path)),
      temp_path_(std::move(temp_path)),
      fd_(fd),
      layout_(std::move(layout)) {
  buffer_.reserve(kWriteBufferSize);
  // Zero-size tensors at the front are complete already.
  while (next_ < layout_.tensors.size() &&
         layout_.tensors[next_].byte_size() == 0) {
    ++next_;
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (!finished_ && error_.ok())
    Fail(Status::Aborted("abandoned")).IgnoreError();
}

Status SafetensorsWriter::Fail(Status status) {
  if (error_.ok()) {
    error_ = status;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::unlink(temp_path_.c_str());
  }
  return status;
}

Status SafetensorsWriter::CheckUsable() const {
  if (!error_.ok()) {
    return Status::FailedPrecondition("safetensors writer for " + path_ +
                                      " failed earlier: " + error_.ToString());
  }
  if (finished_) {
    return Status::FailedPrecondition("safetensors writer for " + path_ +
                                      " is finished");
  }
  return Status::OK();
}

Status SafetensorsWriter::Flush() {
  Status s = WriteAll(fd_, buffer_.data(), buffer_.size(), temp_path_);
  buffer_.clear();
  return s.ok() ? s : Fail(s);
}

Status SafetensorsWriter::Write(ConstBytes bytes) {
  if (buffer_.size() + bytes.size() > kWriteBufferSize) {
    HY_RETURN_IF_ERROR(Flush());
  }
  if (bytes.size() >= kWriteBufferSize) {
    Status s = WriteAll(fd_, bytes.data(), bytes.size(), temp_path_);
    return s.ok() ? s : Fail(s);
  }
  buffer_.insert(buffer_.end(), bytes.data(), bytes.data() + bytes.size());
  return Status::OK();
}

Status SafetensorsWriter::Append(std::string_view name, ConstBytes bytes) {
  HY_RETURN_IF_ERROR(CheckUsable());
  const auto& ts = layout_.tensors;
  if (bytes.empty()) {
    for (const SafetensorsTensor& t : ts) {
      if (t.meta.name == name) return Status::OK();
    }
  }
  if (next_ == ts.size() || ts[next_].meta.name != name) {
    const std::string due =
        next_ == ts.size() ? "no more tensor data"
                           : "bytes of tensor " + Quote(ts[next_].meta.name);
    return Fail(Status::InvalidArgument(
        "safetensors writer for " + path_ + " expects " + due +
        " next (data order), got " + std::to_string(bytes.size()) +
        " bytes for " + Quote(name)));
  }
  const uint64_t remaining = ts[next_].byte_size() - next_filled_;
  if (bytes.size() > remaining) {
    return Fail(Status::InvalidArgument(
        "got " + std::to_string(bytes.size()) + " bytes for tensor " +
        Quote(name) + ", which has only " + std::to_string(remaining) +
        " bytes left of " + std::to_string(ts[next_].byte_size())));
  }
  HY_RETURN_IF_ERROR(Write(bytes));
  next_filled_ += bytes.size();
  while (next_ < ts.size() && next_filled_ == ts[next_].byte_size()) {
    ++next_;
    next_filled_ = 0;
  }
  return Status::OK();
}

Status SafetensorsWriter::Finish() {
  HY_RETURN_IF_ERROR(CheckUsable());
  if (next_ < layout_.tensors.size()) {
    const SafetensorsTensor& t = layout_.tensors[next_];
    return Fail(Status::InvalidArgument(
        "Finish before all data was written: tensor " + Quote(t.meta.name) +
        " has " + std::to_string(next_filled_) + " of " +
        std::to_string(t.byte_size()) + " bytes"));
  }
  HY_RETURN_IF_ERROR(Flush());
  if (::fsync(fd_) != 0) {
    return Fail(ErrnoStatus("cannot fsync " + temp_path_, errno));
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    return Fail(ErrnoStatus("cannot close " + temp_path_, errno));
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return Fail(
        ErrnoStatus("cannot rename " + temp_path_ + " to " + path_, errno));
  }
  finished_ = true;
  // Make the rename durable. The file is complete under its name either way.
  const std::string dir = DirName(path_);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ErrnoStatus("cannot open directory " + dir, errno);
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  return rc == 0 ? Status::OK()
                 : ErrnoStatus("cannot fsync directory " + dir, err);
}

Status WriteSafetensors(
    const std::string& path,
    const std::vector<std::pair<TensorMeta, ConstBytes>>& tensors,
    const std::map<std::string, std::string>& metadata) {
  std::vector<TensorMeta> metas;
  std::map<std::string_view, ConstBytes> data;
  for (const auto& [meta, bytes] : tensors) {
    HY_ASSIGN_OR_RETURN(int64_t size, meta.ByteSize());
    if (bytes.size() != static_cast<uint64_t>(size)) {
      return Status::InvalidArgument(
          "tensor " + meta.DebugString() + " needs " + std::to_string(size) +
          " bytes, got " + std::to_string(bytes.size()));
    }
    metas.push_back(meta);
    data.emplace(meta.name, bytes);
  }
  HY_ASSIGN_OR_RETURN(
      auto writer, SafetensorsWriter::Create(path, std::move(metas), metadata));
  for (const SafetensorsTensor& t : writer->tensors()) {
    HY_RETURN_IF_ERROR(writer->Append(t.meta.name, data[t.meta.name]));
  }
  return writer->Finish();
}

}  // namespace hy::statestore
