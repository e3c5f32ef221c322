#include "hy/metrics/names.h"

#include <string>

namespace hy::metrics {
namespace {

bool IsAlpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string Quote(std::string_view s) {
  std::string out = "\"";
  out.append(s);
  out += '"';
  return out;
}

Status ValidateName(std::string_view name, bool allow_colon,
                    std::string_view what) {
  if (name.empty()) {
    return Status::InvalidArgument(std::string(what) + " is empty");
  }
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') {
    return Status::InvalidArgument(std::string(what) + " " + Quote(name) +
                                   " starts with \"__\", which Prometheus "
                                   "reserves");
  }
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = IsAlpha(c) || c == '_' || (allow_colon && c == ':') ||
              (i > 0 && IsDigit(c));
    if (!ok) {
      return Status::InvalidArgument(std::string(what) + " " + Quote(name) +
                                     " has an invalid character at " +
                                     std::to_string(i) + " (allowed: " +
                                     (allow_colon ? "[a-zA-Z_:][a-zA-Z0-9_:]*"
                                                  : "[a-zA-Z_][a-zA-Z0-9_]*") +
                                     ")");
    }
  }
  return Status::OK();
}

}  // namespace

Status ValidateMetricName(std::string_view name) {
  return ValidateName(name, /*allow_colon=*/true, "metric name");
}

Status ValidateLabelName(std::string_view name) {
  return ValidateName(name, /*allow_colon=*/false, "label name");
}

Status ValidateUtf8(std::string_view text, std::string_view what) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      len = 0;
      cp = 0;
    }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) {
        ok = false;
      } else {
        cp = (cp << 6) | (s[i + k] & 0x3F);
      }
    }
    if (ok) {
      static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (!ok) {
      return Status::InvalidArgument(
          std::string(what) + " is not valid UTF-8 (bad byte at offset " +
          std::to_string(i) + ")");
    }
    i += len;
  }
  return Status::OK();
}

Status ValidateLabels(const Labels& labels) {
  for (const auto& [name, value] : labels) {
    HY_RETURN_IF_ERROR(ValidateLabelName(name));
    HY_RETURN_IF_ERROR(ValidateUtf8(value, "value of label \"" + name + "\""));
  }
  return Status::OK();
}

}  // namespace hy::metrics
