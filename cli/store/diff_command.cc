// hyctl diff A B: which tensors of two committed states differ, in how
// many elements, and by how much. A and B are stores or run roots, at a
// step: PATH or PATH@STEP. Tensors are compared by value, across dtypes
// too (bf16 and f16 widened), within --atol / --rtol. Exits 0 when the
// states are equal, 1 when a tensor differs.

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
#include "version_select.h"
#include "store/diff_command.h"
#include "store/store_commands.h"

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

// When two elements count as equal: |a - b| <= atol + rtol * |b| (numpy's
// isclose); both 0 means equal values only.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

bool IsFloat(DType d) {
  return d == DType::kF32 || d == DType::kF64 || d == DType::kBF16 ||
         d == DType::kF16;
}

// Whether u (of A) and v (of B) are equal within `tol`: the same value
// (+0 and -0 too), both NaN, or close enough.
bool Close(double u, double v, const Tolerance& tol) {
  if (u == v) return true;
  if (std::isnan(u) || std::isnan(v)) return std::isnan(u) && std::isnan(v);
  return std::fabs(u - v) <= tol.atol + tol.rtol * std::fabs(v);
}

// Compares one tensor of the same shape in both states, `ma` in A and `mb`
// in B, element by element as doubles (every dtype hy stores widens to a
// double exactly, but for 64-bit integers beyond 2^53, which are compared
// by their bits when both sides have that dtype and no tolerance is set).
Result<TensorDiff> Compare(StateSource* a, StateSource* b, const TensorMeta& ma,
                           const TensorMeta& mb, const Tolerance& tol) {
  TensorDiff d;
  HY_ASSIGN_OR_RETURN(int64_t n, ma.NumElements());
  const size_t ea = DTypeSize(ma.dtype), eb = DTypeSize(mb.dtype);
  const bool same = ma.dtype == mb.dtype;
  const bool exact = tol.atol == 0 && tol.rtol == 0;
  // Same integer dtype, no tolerance: different bits, different values.
  const bool by_bits = same && exact && !IsFloat(ma.dtype);
  std::vector<uint8_t> x, y;
  for (int64_t off = 0; off < n; off += kPieceElements) {
    const int64_t len = std::min(kPieceElements, n - off);
    x.resize(static_cast<size_t>(len) * ea);
    y.resize(static_cast<size_t>(len) * eb);
    HY_RETURN_IF_ERROR(a->ReadRegion(ma.name, {off, len}, MutableBytes(x)));
    HY_RETURN_IF_ERROR(b->ReadRegion(mb.name, {off, len}, MutableBytes(y)));
    if (same && std::memcmp(x.data(), y.data(), x.size()) == 0) continue;
    for (int64_t i = 0; i < len; ++i) {
      const uint8_t* p = x.data() + i * ea;
      const uint8_t* q = y.data() + i * eb;
      if (same && std::memcmp(p, q, ea) == 0) continue;
      const double u = Element(ma.dtype, p), v = Element(mb.dtype, q);
      if (!by_bits && Close(u, v, tol)) continue;
      ++d.different;
      const double gap = std::fabs(u - v);
      d.max_abs = std::isnan(gap) ? INFINITY : std::max(d.max_abs, gap);
    }
  }
  return d;
}

struct DiffArgs {
  std::string a, b, format;
  Tolerance tol;
};

int Diff(const DiffArgs& args) {
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
  int across_dtypes = 0;  // Compared by value between two dtypes.
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
    } else if (it->second.shape != m.shape) {
      add(name,
          "A " + std::string(SafetensorsName(m.dtype)) + ShapeString(m.shape) +
              ", B " + std::string(SafetensorsName(it->second.dtype)) +
              ShapeString(it->second.shape),
          {});
    } else {
      const TensorMeta& mb = it->second;
      Result<TensorDiff> d =
          Compare(src[0].get(), src[1].get(), m, mb, args.tol);
      if (!d.ok()) return Report("diff", d.status().WithContext(name));
      std::string what = "values differ";
      if (mb.dtype != m.dtype) {
        ++across_dtypes;
        what += " (A " + std::string(SafetensorsName(m.dtype)) + ", B " +
                std::string(SafetensorsName(mb.dtype)) + ")";
      }
      if (d->different > 0) add(name, what, *d);
    }
  }
  size_t all = ta.size();  // Tensors in A or B.
  for (const auto& [name, m] : tb) {
    if (!ta.count(name)) {
      ++all;
      add(name, "only in B", {});
    }
  }
  std::string summary = std::to_string(differ) + " of " + std::to_string(all) +
                        " tensors differ (" + std::to_string(elements) +
                        " elements)";
  if (across_dtypes > 0) {
    summary += "; " + std::to_string(across_dtypes) +
               " compared by value across dtypes";
  }
  if (args.format == "json") {
    std::cout << ordered_json{{"a", src[0]->Describe()},
                              {"b", src[1]->Describe()},
                              {"tensors_compared", ta.size()},
                              {"tensors_total", all},
                              {"tensors_across_dtypes", across_dtypes},
                              {"atol", args.tol.atol},
                              {"rtol", args.tol.rtol},
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
  return differ > 0 ? kExitError : kExitOk;
}

}  // namespace

void AddDiffCommand(CLI::App* app, int* exit_code) {
  auto args = std::make_shared<DiffArgs>();
  CLI::App* diff = app->add_subcommand(
      "diff",
      "Compare two committed states tensor by tensor: stores or run roots, "
      "at a step (PATH@STEP); without @STEP the newest. Values are compared "
      "across dtypes too (bf16, f16 widened). Exit 0 when every tensor is "
      "equal, 1 when some differ");
  diff->add_option("A", args->a, "Store or run root, optionally @STEP")
      ->required();
  diff->add_option("B", args->b, "Store or run root, optionally @STEP")
      ->required();
  diff->add_option("--atol", args->tol.atol,
                   "Elements within this of each other are equal (default 0)")
      ->check(CLI::NonNegativeNumber);
  diff->add_option("--rtol", args->tol.rtol,
                   "Elements within this times |B's element| of each other "
                   "are equal; with --atol: |a-b| <= atol + rtol*|b| "
                   "(default 0)")
      ->check(CLI::NonNegativeNumber);
  AddOutputOption(diff, &args->format, {"table", "json"});
  diff->callback([args, exit_code] { *exit_code = Diff(*args); });
}

}  // namespace hy::cli
