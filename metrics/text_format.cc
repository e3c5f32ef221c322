#include "hy/metrics/text_format.h"

#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <string>

namespace hy::metrics {
namespace {

void AppendLabels(const Labels& labels, const std::string* le,
                  std::string* out) {
  if (labels.empty() && le == nullptr) return;
  *out += '{';
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) *out += ',';
    first = false;
    *out += name;
    *out += "=\"";
    *out += EscapeLabelValue(value);
    *out += '"';
  }
  if (le != nullptr) {
    if (!first) *out += ',';
    *out += "le=\"";
    *out += *le;
    *out += '"';
  }
  *out += '}';
}

void AppendSample(std::string_view name, std::string_view suffix,
                  const Labels& labels, const std::string* le,
                  const std::string& value, std::string* out) {
  *out += name;
  *out += suffix;
  AppendLabels(labels, le, out);
  *out += ' ';
  *out += value;
  *out += '\n';
}

}  // namespace

std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::string FormatDouble(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == 0) return "0";  // Also -0, as the Go client writes it.
  // Shortest round-trip digits in scientific form: "-d.ddde+XX".
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value,
                           std::chars_format::scientific);
  std::string_view sci(buf, res.ptr - buf);
  bool negative = !sci.empty() && sci[0] == '-';
  if (negative) sci.remove_prefix(1);
  size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits += c;
  }
  int exp = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0),
                  sci.data() + sci.size(), exp);
  std::string out = negative ? "-" : "";
  // Go's 'g' with the shortest precision (strconv/ftoa.go): exponent form
  // when exp < -4 or exp >= 6, with at least two exponent digits.
  if (exp < -4 || exp >= 6) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    out += 'e';
    out += exp < 0 ? '-' : '+';
    int a = exp < 0 ? -exp : exp;
    if (a < 10) out += '0';
    out += std::to_string(a);
  } else if (exp < 0) {
    out += "0.";
    out.append(static_cast<size_t>(-exp - 1), '0');
    out += digits;
  } else {
    size_t int_digits = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_digits) {
      out += digits;
      out.append(int_digits - digits.size(), '0');
    } else {
      out.append(digits, 0, int_digits);
      out += '.';
      out.append(digits, int_digits, std::string::npos);
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void AppendFamilyText(const MetricFamilySnapshot& family, std::string* out) {
  const std::string& name = family.name;
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += EscapeHelp(family.help);
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += MetricTypeName(family.type);
  *out += '\n';
  for (const MetricSnapshot& m : family.metrics) {
    if (family.type != MetricType::kHistogram) {
      AppendSample(name, "", m.labels, nullptr, FormatDouble(m.value), out);
      continue;
    }
    for (const BucketSnapshot& b : m.buckets) {
      std::string le = FormatDouble(b.upper_bound);
      AppendSample(name, "_bucket", m.labels, &le,
                   std::to_string(b.cumulative_count), out);
    }
    const std::string inf = "+Inf";
    std::string count = std::to_string(m.count);
    AppendSample(name, "_bucket", m.labels, &inf, count, out);
    AppendSample(name, "_sum", m.labels, nullptr, FormatDouble(m.sum), out);
    AppendSample(name, "_count", m.labels, nullptr, count, out);
  }
}

std::string SerializeText(const std::vector<MetricFamilySnapshot>& families) {
  std::string out;
  for (const MetricFamilySnapshot& family : families) {
    AppendFamilyText(family, &out);
  }
  return out;
}

std::vector<MetricFamilySnapshot> MergeFamilies(
    std::vector<MetricFamilySnapshot> families, size_t* dropped) {
  size_t left_out = 0;
  std::vector<MetricFamilySnapshot> out;
  std::map<std::string, size_t> index;           // name -> position in out.
  std::map<std::string, std::set<Labels>> seen;  // name -> label sets.
  for (MetricFamilySnapshot& family : families) {
    auto it = index.find(family.name);
    if (it == index.end()) {
      std::set<Labels>& labels = seen[family.name];
      for (const MetricSnapshot& m : family.metrics) labels.insert(m.labels);
      index.emplace(family.name, out.size());
      out.push_back(std::move(family));
      continue;
    }
    MetricFamilySnapshot& first = out[it->second];
    if (first.type != family.type || first.help != family.help) {
      ++left_out;
      continue;
    }
    std::set<Labels>& labels = seen[family.name];
    for (MetricSnapshot& m : family.metrics) {
      if (labels.insert(m.labels).second) {
        first.metrics.push_back(std::move(m));
      } else {
        ++left_out;
      }
    }
  }
  if (dropped != nullptr) *dropped = left_out;
  return out;
}

}  // namespace hy::metrics
