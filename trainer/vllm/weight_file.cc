// The engines' shared-memory weight file (see weight_file.h).

#include "hy/trainer/vllm/weight_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace hy::trainer {
namespace {

constexpr uint64_t kAlign = 64;

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError(what + " " + path + ": " + std::strerror(errno));
}

Result<uint8_t*> MapFd(int fd, uint64_t size, const std::string& path) {
  void* p = mmap(nullptr, size > 0 ? size : 1, PROT_READ | PROT_WRITE,
                 MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Errno("mmap", path);
  return static_cast<uint8_t*>(p);
}

}  // namespace

Result<DType> EngineDType(const std::string& name) {
  if (name == "bfloat16" || name == "bf16") return DType::kBF16;
  if (name == "float32" || name == "f32" || name == "fp32") return DType::kF32;
  return Status::InvalidArgument("engine dtype " + name +
                                 ": must be bfloat16 or float32");
}

Result<WeightFileLayout> LayoutWeightFile(const std::vector<TensorMeta>& model,
                                          bool tied, DType dtype) {
  if (dtype != DType::kBF16 && dtype != DType::kF32) {
    return Status::InvalidArgument("weight file: bfloat16 or float32 only");
  }
  WeightFileLayout layout;
  layout.dtype = dtype;
  const uint64_t width = dtype == DType::kF32 ? 4 : 2;
  uint64_t at = 0;
  const WeightFileEntry* embed = nullptr;
  for (const TensorMeta& m : model) {
    HY_ASSIGN_OR_RETURN(const int64_t n, m.NumElements());
    WeightFileEntry e;
    e.name = m.name;
    e.shape = m.shape;
    e.offset = at;
    e.bytes = static_cast<uint64_t>(n) * width;
    at = (at + e.bytes + kAlign - 1) / kAlign * kAlign;
    layout.tensors.push_back(std::move(e));
  }
  for (const WeightFileEntry& e : layout.tensors) {
    if (e.name == "model.embed_tokens.weight") embed = &e;
  }
  if (tied) {
    if (embed == nullptr) {
      return Status::InvalidArgument(
          "weight file: a tied model without model.embed_tokens.weight");
    }
    WeightFileEntry head = *embed;
    head.name = "lm_head.weight";
    layout.aliases.push_back(std::move(head));
  }
  layout.size = at;
  return layout;
}

std::string WeightFileLayout::ManifestJson() const {
  nlohmann::json out = nlohmann::json::array();
  const char* dt = dtype == DType::kF32 ? "float32" : "bfloat16";
  for (const auto* list : {&tensors, &aliases}) {
    for (const WeightFileEntry& e : *list) {
      out.push_back({{"name", e.name},
                     {"dtype", dt},
                     {"shape", e.shape},
                     {"offset", e.offset}});
    }
  }
  return out.dump();
}

Result<std::unique_ptr<SharedWeightFile>> SharedWeightFile::Create(
    const std::string& path, uint64_t size) {
  unlink(path.c_str());
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("create", path);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    Status s = Errno("size", path);
    close(fd);
    unlink(path.c_str());
    return s;
  }
  Result<uint8_t*> data = MapFd(fd, size, path);
  close(fd);
  if (!data.ok()) {
    unlink(path.c_str());
    return data.status();
  }
  return std::unique_ptr<SharedWeightFile>(
      new SharedWeightFile(path, *data, size, /*owner=*/true));
}

Result<std::unique_ptr<SharedWeightFile>> SharedWeightFile::Open(
    const std::string& path, uint64_t size) {
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Errno("open", path);
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < size) {
    close(fd);
    return Status::FailedPrecondition(
        "weight file " + path + " is shorter than the " +
        std::to_string(size) + " bytes of this model's layout");
  }
  Result<uint8_t*> data = MapFd(fd, size, path);
  close(fd);
  if (!data.ok()) return data.status();
  return std::unique_ptr<SharedWeightFile>(
      new SharedWeightFile(path, *data, size, /*owner=*/false));
}

SharedWeightFile::~SharedWeightFile() {
  munmap(data_, size_ > 0 ? size_ : 1);
  if (owner_) unlink(path_.c_str());
}

MutableBytes SharedWeightFile::bytes(uint64_t offset, uint64_t length) const {
  return MutableBytes(data_ + offset, length);
}

}  // namespace hy::trainer
