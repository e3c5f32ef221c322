// HfWeights: a model directory's safetensors files (see hf_model.h).

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hy/common/bf16.h"
#include "hy/statestore/safetensors.h"
#include "hy/trainer/hf/hf_model.h"

namespace hy::trainer {
namespace {

using statestore::SafetensorsReader;

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13);  // Inf / NaN.
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // Subnormal: normalise.
    exp = 113;
    while ((mant & 0x400) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// tensor name -> file, from the index, or every tensor of model.safetensors.
Result<std::map<std::string, std::string>> WeightMap(const std::string& dir) {
  const std::string index = dir + "/model.safetensors.index.json";
  std::map<std::string, std::string> out;
  if (!std::filesystem::exists(index)) {
    const std::string single = dir + "/model.safetensors";
    if (!std::filesystem::exists(single)) {
      return Status::NotFound(dir +
                              ": no model.safetensors and no "
                              "model.safetensors.index.json");
    }
    out[""] = "model.safetensors";  // Every tensor of the one file.
    return out;
  }
  std::ifstream in(index, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::IOError("reading " + index);
  return statestore::ParseSafetensorsIndex(text.str(), index);
}

}  // namespace

HfWeights::~HfWeights() = default;

std::vector<std::string> HfWeights::files() const {
  std::vector<std::string> out;
  for (const auto& f : files_) out.push_back(f.first);
  return out;
}

Result<std::unique_ptr<HfWeights>> HfWeights::Open(const std::string& dir,
                                                   const ModelConfig& config) {
  HY_ASSIGN_OR_RETURN(auto weight_map, WeightMap(dir));
  std::unique_ptr<HfWeights> w(new HfWeights());
  std::set<std::string> names;
  for (const auto& [name, file] : weight_map) names.insert(file);
  for (const std::string& file : names) {
    auto reader = SafetensorsReader::Open(dir + "/" + file);
    if (!reader.ok()) {
      const Status& s = reader.status();
      std::string msg(s.message());
      if (msg.find(file) == std::string::npos)
        msg = dir + "/" + file + ": " + msg;
      return Status(s.code(), msg);
    }
    w->files_.emplace_back(file, std::move(*reader));
  }
  const bool single = weight_map.count("") == 1;
  for (const auto& [file, reader] : w->files_) {
    const auto& ts = reader->tensors();
    for (size_t i = 0; i < ts.size(); ++i) {
      const std::string& name = ts[i].meta.name;
      if (!single) {
        auto it = weight_map.find(name);
        if (it == weight_map.end() || it->second != file) continue;
      }
      w->tensors_[name] = Entry{reader.get(), i};
    }
  }
  for (const TensorMeta& want : ModelTensors(config, ModelRole::kActor)) {
    auto it = w->tensors_.find(want.name);
    if (it == w->tensors_.end()) {
      auto listed = weight_map.find(want.name);
      return Status::InvalidArgument(
          dir + ": tensor " + want.name + " is missing" +
          (listed != weight_map.end()
               ? " from " + listed->second + " (the index names that file)"
           : single ? " from model.safetensors"
                    : " (model.safetensors.index.json does not list it)"));
    }
    const TensorMeta& have = it->second.file->tensors()[it->second.index].meta;
    if (have.shape != want.shape) {
      return Status::InvalidArgument(dir + ": tensor " + want.name +
                                     " has shape " + ShapeString(have.shape) +
                                     ", the config needs " +
                                     ShapeString(want.shape));
    }
    if (have.dtype != DType::kF32 && have.dtype != DType::kBF16 &&
        have.dtype != DType::kF16) {
      return Status::InvalidArgument(dir + ": tensor " + want.name +
                                     " has dtype " +
                                     std::string(SafetensorsName(have.dtype)) +
                                     " (F32, BF16 or F16 expected)");
    }
  }
  return w;
}

Status HfWeights::ReadF32(const std::string& name, int64_t begin, int64_t count,
                          float* out) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return Status::NotFound("no tensor " + name);
  const auto& t = it->second.file->tensors()[it->second.index];
  const int64_t numel = *t.meta.NumElements();
  if (begin < 0 || count < 0 || begin + count > numel) {
    return Status::InvalidArgument("elements [" + std::to_string(begin) + ", " +
                                   std::to_string(begin + count) + ") of " +
                                   name + " (" + std::to_string(numel) + ")");
  }
  const uint8_t* base = it->second.file->TensorDataAt(it->second.index).data();
  const size_t esize = DTypeSize(t.meta.dtype);
  const uint8_t* p = base + static_cast<size_t>(begin) * esize;
  switch (t.meta.dtype) {
    case DType::kF32:
      std::memcpy(out, p, static_cast<size_t>(count) * 4);
      break;
    case DType::kBF16:
      WidenBf16ToF32(p, reinterpret_cast<uint8_t*>(out),
                     static_cast<size_t>(count));
      break;
    default:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = HalfToFloat(h);
      }
  }
  return Status::OK();
}

}  // namespace hy::trainer
