// DType: the element types hy stores and moves, with their sizes and their
// safetensors names.
//
// The numeric value of each enumerator is part of hy's on-disk formats (chunk
// headers, manifests): never renumber one, only add new ones.

#ifndef HY_COMMON_DTYPE_H_
#define HY_COMMON_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hy/common/result.h"

namespace hy {

enum class DType : uint8_t {
  kF32 = 1,
  kBF16 = 2,
  kF16 = 3,
  kF64 = 4,
  kI64 = 5,
  kI32 = 6,
  kI8 = 7,
  kU8 = 8,
  kBool = 9,
};

// Every DType, in enumerator order (for tests and tables).
inline constexpr DType kAllDTypes[] = {
    DType::kF32, DType::kBF16, DType::kF16, DType::kF64,  DType::kI64,
    DType::kI32, DType::kI8,   DType::kU8,  DType::kBool,
};

// Size of one element in bytes (bool is stored as one byte). Returns 0 for a
// value that is not a DType enumerator.
size_t DTypeSize(DType dtype);

// True for the floating-point types.
bool IsFloatingPoint(DType dtype);

// The name safetensors uses in its header: "F32", "BF16", "BOOL", ...
// Returns "?" for a value that is not a DType enumerator.
std::string_view SafetensorsName(DType dtype);

// Returns InvalidArgument for a name that is not one of SafetensorsName's.
Result<DType> DTypeFromSafetensorsName(std::string_view name);

// Returns DataLoss if `code` (read from storage) is not a DType enumerator.
Result<DType> DTypeFromCode(uint8_t code);

}  // namespace hy

#endif  // HY_COMMON_DTYPE_H_
