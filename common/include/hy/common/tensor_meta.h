// TensorMeta: what a tensor is, independent of where its bytes live: its
// name, element type and global shape.
//
// Thread-safety: a plain value.

#ifndef HY_COMMON_TENSOR_META_H_
#define HY_COMMON_TENSOR_META_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hy/common/dtype.h"
#include "hy/common/result.h"

namespace hy {

struct TensorMeta {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // Empty for a scalar.

  // Returns InvalidArgument if the name is empty, the dtype is not a DType,
  // a dimension is negative, or the element or byte count overflows int64.
  Status Validate() const;

  // Product of the dimensions (1 for a scalar). Returns InvalidArgument as
  // Validate does.
  Result<int64_t> NumElements() const;

  // NumElements() * DTypeSize(dtype). Returns InvalidArgument as Validate.
  Result<int64_t> ByteSize() const;

  // "name bf16[4096,1024]"-style rendering for logs and tools.
  std::string DebugString() const;

  friend bool operator==(const TensorMeta& a, const TensorMeta& b) {
    return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape;
  }
  friend bool operator!=(const TensorMeta& a, const TensorMeta& b) {
    return !(a == b);
  }
};

// "[2,3]": a shape as messages and tables print it ("[]" for a scalar).
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace hy

#endif  // HY_COMMON_TENSOR_META_H_
