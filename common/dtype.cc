#include "hy/common/dtype.h"

#include <string>

namespace hy {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 ||
         dtype == DType::kF16 || dtype == DType::kF64;
}

std::string_view SafetensorsName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kF64:
      return "F64";
    case DType::kI64:
      return "I64";
    case DType::kI32:
      return "I32";
    case DType::kI8:
      return "I8";
    case DType::kU8:
      return "U8";
    case DType::kBool:
      return "BOOL";
  }
  return "?";
}

Result<DType> DTypeFromSafetensorsName(std::string_view name) {
  for (DType d : kAllDTypes) {
    if (SafetensorsName(d) == name) return d;
  }
  return Status::InvalidArgument("unknown dtype name '" + std::string(name) +
                                 "'");
}

Result<DType> DTypeFromCode(uint8_t code) {
  for (DType d : kAllDTypes) {
    if (static_cast<uint8_t>(d) == code) return d;
  }
  return Status::DataLoss("unknown dtype code " + std::to_string(code));
}

}  // namespace hy
