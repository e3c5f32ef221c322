#include "hy/common/tensor_meta.h"

#include <limits>

namespace hy {

Status TensorMeta::Validate() const { return ByteSize().status(); }

Result<int64_t> TensorMeta::NumElements() const {
  if (name.empty()) return Status::InvalidArgument("tensor name is empty");
  if (DTypeSize(dtype) == 0) {
    return Status::InvalidArgument("tensor '" + name +
                                   "' has an invalid dtype");
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return Status::InvalidArgument("tensor '" + name +
                                     "' has a negative dimension");
    }
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return Status::InvalidArgument("tensor '" + name +
                                     "' element count overflows int64");
    }
    n *= d;
  }
  return n;
}

Result<int64_t> TensorMeta::ByteSize() const {
  HY_ASSIGN_OR_RETURN(int64_t n, NumElements());
  const int64_t es = static_cast<int64_t>(DTypeSize(dtype));
  if (n > std::numeric_limits<int64_t>::max() / es) {
    return Status::InvalidArgument("tensor '" + name +
                                   "' byte size overflows int64");
  }
  return n * es;
}

std::string TensorMeta::DebugString() const {
  std::string out = name;
  out += ' ';
  out += SafetensorsName(dtype);
  return out + ShapeString(shape);
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace hy
