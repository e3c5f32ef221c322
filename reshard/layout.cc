#include "hy/reshard/layout.h"

#include <charconv>
#include <string>

namespace hy::reshard {
namespace {

constexpr int kMaxWorld = 1 << 20;
constexpr Dim kDefaultOrder[kNumDims] = {Dim::kTp, Dim::kFsdp, Dim::kDp,
                                         Dim::kPp};
// Canonical print order of the sizes.
constexpr Dim kPrintOrder[kNumDims] = {Dim::kTp, Dim::kPp, Dim::kDp,
                                       Dim::kFsdp};

bool ParseDim(std::string_view s, Dim* dim) {
  for (Dim d : kDefaultOrder) {
    if (s == DimName(d)) {
      *dim = d;
      return true;
    }
  }
  return false;
}

bool ParseInt(std::string_view s, int* out) {
  if (s.empty() || s.size() > 9 || (s.size() > 1 && s[0] == '0')) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::vector<OrderFactor> DefaultOrder(const std::array<int, kNumDims>& sizes) {
  std::vector<OrderFactor> order;
  for (Dim d : kDefaultOrder) {
    int n = sizes[static_cast<int>(d)];
    if (n > 1) order.push_back({d, n});
  }
  return order;
}

std::string OrderString(const std::vector<OrderFactor>& order,
                        const std::array<int, kNumDims>& sizes) {
  // A factor prints bare when it takes the rest of its dimension, i.e. it
  // is the last factor of that dimension and the earlier ones plus it
  // multiply to the size.
  std::string out;
  std::array<int, kNumDims> seen{1, 1, 1, 1};
  for (size_t i = 0; i < order.size(); ++i) {
    const OrderFactor& f = order[i];
    int d = static_cast<int>(f.dim);
    seen[d] *= f.size;
    bool last_of_dim = seen[d] == sizes[d];
    if (!out.empty()) out += '-';
    out += DimName(f.dim);
    if (!last_of_dim) out += ":" + std::to_string(f.size);
  }
  return out;
}

}  // namespace

std::string_view DimName(Dim dim) {
  switch (dim) {
    case Dim::kTp:
      return "tp";
    case Dim::kFsdp:
      return "fsdp";
    case Dim::kDp:
      return "dp";
    case Dim::kPp:
      return "pp";
  }
  return "?";
}

Layout::Layout() = default;

Result<Layout> Layout::Make(int tp, int pp, int dp, int fsdp) {
  std::string text = "tp=" + std::to_string(tp) + ",pp=" + std::to_string(pp) +
                     ",dp=" + std::to_string(dp) +
                     ",fsdp=" + std::to_string(fsdp);
  return Parse(text);
}

Result<Layout> Layout::Parse(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("layout \"" + std::string(text) +
                                   "\": " + why);
  };
  if (text.empty()) return bad("empty");
  Layout layout;
  std::array<bool, kNumDims> given{};
  std::string_view order_text;
  bool has_order = false;
  for (std::string_view item : Split(text, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return bad("expected key=value, got \"" + std::string(item) + "\"");
    }
    std::string_view key = item.substr(0, eq);
    std::string_view value = item.substr(eq + 1);
    if (key == "order") {
      if (has_order) return bad("order given twice");
      has_order = true;
      order_text = value;
      continue;
    }
    Dim dim;
    if (!ParseDim(key, &dim)) {
      return bad("unknown key \"" + std::string(key) +
                 "\" (expected tp, pp, dp, fsdp or order)");
    }
    int d = static_cast<int>(dim);
    if (given[d]) return bad(std::string(key) + " given twice");
    given[d] = true;
    int n = 0;
    if (!ParseInt(value, &n) || n < 1) {
      return bad(std::string(key) + " must be a positive integer, got \"" +
                 std::string(value) + "\"");
    }
    layout.sizes_[d] = n;
  }
  int64_t world = 1;
  for (int n : layout.sizes_) {
    world *= n;
    if (world > kMaxWorld) {
      return bad("world size over " + std::to_string(kMaxWorld));
    }
  }
  if (!has_order) {
    layout.order_ = DefaultOrder(layout.sizes_);
    return layout;
  }
  // Explicit order: factors multiply to each dimension's size; a bare
  // factor takes what is left.
  std::array<int, kNumDims> used{1, 1, 1, 1};
  std::vector<std::string_view> factors = Split(order_text, '-');
  for (std::string_view f : factors) {
    size_t colon = f.find(':');
    Dim dim;
    if (!ParseDim(f.substr(0, colon), &dim)) {
      return bad("unknown dimension \"" + std::string(f.substr(0, colon)) +
                 "\" in order");
    }
    int d = static_cast<int>(dim);
    int n = 0;
    if (colon == std::string_view::npos) {
      if (layout.sizes_[d] % used[d] != 0) {
        return bad("order: factors of " + std::string(DimName(dim)) +
                   " do not divide its size");
      }
      n = layout.sizes_[d] / used[d];
    } else if (!ParseInt(f.substr(colon + 1), &n) || n < 1) {
      return bad("bad factor \"" + std::string(f) + "\" in order");
    }
    if (static_cast<int64_t>(used[d]) * n > layout.sizes_[d] ||
        layout.sizes_[d] % (used[d] * n) != 0) {
      return bad("order: factors of " + std::string(DimName(dim)) +
                 " exceed or do not divide its size " +
                 std::to_string(layout.sizes_[d]));
    }
    used[d] *= n;
    if (n > 1) layout.order_.push_back({dim, n});
  }
  for (int d = 0; d < kNumDims; ++d) {
    if (used[d] != layout.sizes_[d]) {
      return bad("order covers " + std::to_string(used[d]) + " of " +
                 std::string(DimName(static_cast<Dim>(d))) + "=" +
                 std::to_string(layout.sizes_[d]));
    }
  }
  return layout;
}

Coord Layout::CoordOf(int rank) const {
  std::array<int, kNumDims> index{0, 0, 0, 0};
  std::array<int, kNumDims> scale{1, 1, 1, 1};
  for (const OrderFactor& f : order_) {
    int d = static_cast<int>(f.dim);
    index[d] += (rank % f.size) * scale[d];
    scale[d] *= f.size;
    rank /= f.size;
  }
  Coord c;
  c.tp = index[0];
  c.fsdp = index[1];
  c.dp = index[2];
  c.pp = index[3];
  return c;
}

int Layout::RankOf(const Coord& coord) const {
  std::array<int, kNumDims> index{coord.tp, coord.fsdp, coord.dp, coord.pp};
  int rank = 0;
  int place = 1;
  for (const OrderFactor& f : order_) {
    int d = static_cast<int>(f.dim);
    rank += (index[d] % f.size) * place;
    index[d] /= f.size;
    place *= f.size;
  }
  return rank;
}

std::string Layout::ToString() const {
  std::string out;
  for (Dim d : kPrintOrder) {
    int n = size(d);
    if (n == 1) continue;
    if (!out.empty()) out += ',';
    out += std::string(DimName(d)) + "=" + std::to_string(n);
  }
  if (out.empty()) return "dp=1";
  std::string order = OrderString(order_, sizes_);
  if (order != OrderString(DefaultOrder(sizes_), sizes_)) {
    out += ",order=" + order;
  }
  return out;
}

}  // namespace hy::reshard
