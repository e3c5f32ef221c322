// hyctl diff A B: which tensors of two committed states differ, in how
// many elements, and by how much. A and B are stores or run roots, at a
// step: PATH or PATH@STEP.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "hy/common/bf16.h"
#include "state_source.h"
#include "store_commands.h"

namespace hy::cli {
namespace {

using nlohmann::ordered_json;

// Elements compared per read.
constexpr int64_t kPieceElements = 8 << 20;

double F16ToDouble(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(frac, -24);
  } else if (exp == 31) {
    v = frac ? NAN : INFINITY;
  } else {
    v = std::ldexp(frac + 1024, exp - 25);
  }
  return sign ? -v : v;
}

double Element(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kBF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return Bf16BitsToFloat(b);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return F16ToDouble(h);
    }
    case DType::kF64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DType::kI64: {
      int64_t i;
      std::memcpy(&i, p, 8);
      return static_cast<double>(i);
    }
    case DType::kI32: {
      int32_t i;
      std::memcpy(&i, p, 4);
      return i;
    }
    case DType::kI8:
      return static_cast<int8_t>(*p);
    case DType::kU8:
    case DType::kBool:
      return *p;
  }
  return 0;
}

struct TensorDiff {
  int64_t different = 0;
  double max_abs = 0;
};

// Compares one tensor of equal dtype and shape in both states.
Result<TensorDiff> Compare(StateSource* a, StateSource* b,
                           const TensorMeta& meta) {
  TensorDiff d;
  HY_ASSIGN_OR_RETURN(int64_t n, meta.NumElements());
  const size_t es = DTypeSize(meta.dtype);
  std::vector<uint8_t> x, y;
  for (int64_t off = 0; off < n; off += kPieceElements) {
    const int64_t len = std::min(kPieceElements, n - off);
    x.resize(static_cast<size_t>(len) * es);
    y.resize(x.size());
    HY_RETURN_IF_ERROR(a->ReadRegion(meta.name, {off, len}, MutableBytes(x)));
    HY_RETURN_IF_ERROR(b->ReadRegion(meta.name, {off, len}, MutableBytes(y)));
    if (std::memcmp(x.data(), y.data(), x.size()) == 0) continue;
    for (int64_t i = 0; i < len; ++i) {
      const uint8_t* p = x.data() + i * es;
      const uint8_t* q = y.data() + i * es;
      if (std::memcmp(p, q, es) == 0) continue;
      const double u = Element(meta.dtype, p), v = Element(meta.dtype, q);
      if (u == v) continue;  // +0 and -0.
      if (std::isnan(u) && std::isnan(v)) continue;
      ++d.different;
      const double gap = std::fabs(u - v);
      d.max_abs = std::isnan(gap) ? INFINITY : std::max(d.max_abs, gap);
    }
  }
  return d;
}

struct Args {
  std::string a, b, format;
};

int Diff(const Args& args) {
  std::unique_ptr<StateSource> src[2];
  const std::string* specs[2] = {&args.a, &args.b};
  for (int i = 0; i < 2; ++i) {
    auto [path, n] = ParseStateSpec(*specs[i]);
    auto s = OpenStateSource(path, VersionChoice{n, std::nullopt});
    if (!s.ok()) {
      const Status& e = s.status();
      const bool named = e.message().find(path) != std::string_view::npos;
      return ReportArgs("diff", named ? e : e.WithContext(path));
    }
    src[i] = std::move(s).value();
  }
  std::map<std::string, TensorMeta> ta, tb;
  for (auto& m : src[0]->Tensors()) ta[m.name] = m;
  for (auto& m : src[1]->Tensors()) tb[m.name] = m;
  std::vector<std::vector<std::string>> rows;
  ordered_json tensors = ordered_json::array();
  int differ = 0;
  int64_t elements = 0;
  auto add = [&](const std::string& name, const std::string& what,
                 const TensorDiff& d) {
    ++differ;
    elements += d.different;
    char max[32];
    std::snprintf(max, sizeof(max), "%.6g", d.max_abs);
    rows.push_back({name, what, std::to_string(d.different), max});
    tensors.push_back({{"name", name},
                       {"status", what},
                       {"different_elements", d.different},
                       {"max_abs_diff", d.max_abs}});
  };
  for (const auto& [name, m] : ta) {
    auto it = tb.find(name);
    if (it == tb.end()) {
      add(name, "only in A", {});
    } else if (it->second.dtype != m.dtype || it->second.shape != m.shape) {
      add(name,
          "A " + std::string(SafetensorsName(m.dtype)) + ShapeString(m.shape) +
              ", B " + std::string(SafetensorsName(it->second.dtype)) +
              ShapeString(it->second.shape),
          {});
    } else {
      Result<TensorDiff> d = Compare(src[0].get(), src[1].get(), m);
      if (!d.ok()) return Report("diff", d.status().WithContext(name));
      if (d->different > 0) add(name, "values differ", *d);
    }
  }
  for (const auto& [name, m] : tb) {
    if (!ta.count(name)) add(name, "only in B", {});
  }
  const std::string summary = std::to_string(differ) + " of " +
                              std::to_string(std::max(ta.size(), tb.size())) +
                              " tensors differ (" + std::to_string(elements) +
                              " elements)";
  if (args.format == "json") {
    std::cout << ordered_json{{"a", src[0]->Describe()},
                              {"b", src[1]->Describe()},
                              {"tensors_compared", ta.size()},
                              {"tensors_differing", differ},
                              {"elements_differing", elements},
                              {"tensors", std::move(tensors)}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << "A: " << src[0]->Describe() << "\nB: " << src[1]->Describe()
              << "\n";
    if (!rows.empty()) {
      std::cout << FormatTable(
          {"TENSOR", "DIFFERENCE", "ELEMENTS", "MAX_ABS_DIFF"}, rows);
    }
    std::cout << summary << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddDiffCommand(CLI::App* app, int* exit_code) {
  auto args = std::make_shared<Args>();
  CLI::App* diff = app->add_subcommand(
      "diff",
      "Compare two committed states tensor by tensor: stores or run roots, "
      "at a step (PATH@STEP); without @STEP the newest");
  diff->add_option("A", args->a, "Store or run root, optionally @STEP")
      ->required();
  diff->add_option("B", args->b, "Store or run root, optionally @STEP")
      ->required();
  AddOutputOption(diff, &args->format, {"table", "json"});
  diff->callback([args, exit_code] { *exit_code = Diff(*args); });
}

}  // namespace hy::cli
