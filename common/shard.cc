#include "hy/common/shard.h"
#include "hy/common/tensor_meta.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace hy {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::string RunString(const FlatRun& r) {
  return "[" + std::to_string(r.offset) + ", " +
         std::to_string(r.offset + r.length) + ")";
}

// The element count of `shape`, or InvalidArgument if a dimension is
// negative or the count overflows int64.
Result<int64_t> ShapeNumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return Status::InvalidArgument("shape " + ShapeString(shape) +
                                     " has a negative dimension");
    }
    if (d != 0 && n > kInt64Max / d) {
      return Status::InvalidArgument("shape " + ShapeString(shape) +
                                     " element count overflows int64");
    }
    n *= d;
  }
  return n;
}

// The checks on runs that need no shape: each has offset >= 0, length > 0
// and an end within int64, and no two overlap.
Status CheckRunsShapeFree(const std::vector<FlatRun>& runs) {
  for (size_t i = 0; i < runs.size(); ++i) {
    const FlatRun& r = runs[i];
    if (r.offset < 0 || r.length <= 0 || r.offset > kInt64Max - r.length) {
      return Status::InvalidArgument(
          "run " + std::to_string(i) + " (offset " + std::to_string(r.offset) +
          ", length " + std::to_string(r.length) +
          ") needs offset >= 0, length > 0 and an end within int64");
    }
  }
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&runs](size_t a, size_t b) {
    return runs[a].offset < runs[b].offset;
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const FlatRun& prev = runs[order[k - 1]];
    const FlatRun& cur = runs[order[k]];
    if (cur.offset < prev.end()) {
      return Status::InvalidArgument("runs " + std::to_string(order[k - 1]) +
                                     " " + RunString(prev) + " and " +
                                     std::to_string(order[k]) + " " +
                                     RunString(cur) + " overlap");
    }
  }
  return Status::OK();
}

// Appends `run` to `out`, merging it into the last run if they touch.
void AppendMerged(std::vector<FlatRun>* out, FlatRun run) {
  if (!out->empty() && out->back().end() == run.offset) {
    out->back().length += run.length;
  } else {
    out->push_back(run);
  }
}

// A cursor over the text form for Parse.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  bool AtEnd() const { return pos_ == text_.size(); }
  bool Peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  // Consumes `token` if the text continues with it.
  bool Consume(std::string_view token) {
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }

  Status Expect(std::string_view token) {
    if (Consume(token)) return Status::OK();
    return Error("expected '" + std::string(token) + "'");
  }

  Result<int64_t> Int() {
    const size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const int digit = text_[pos_] - '0';
      if (value > (kInt64Max - digit) / 10) {
        pos_ = start;
        return Error("number out of int64 range");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) return Error("expected a decimal number");
    if (text_[start] == '0' && pos_ - start > 1) {
      pos_ = start;
      return Error("number with a leading zero");
    }
    return value;
  }

  // InvalidArgument quoting the text (shortened if long) and the position.
  Status Error(std::string_view what) const {
    constexpr size_t kMaxQuote = 80;
    std::string quoted(text_.substr(0, kMaxQuote));
    if (text_.size() > kMaxQuote) quoted += "...";
    return Status::InvalidArgument("shard geometry '" + quoted +
                                   "': " + std::string(what) + " at position " +
                                   std::to_string(pos_));
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

ShardGeometry ShardGeometry::WholeTensor(const std::vector<int64_t>& shape) {
  return FromBox(Box{std::vector<int64_t>(shape.size(), 0), shape});
}

ShardGeometry ShardGeometry::FromBox(Box box) {
  ShardGeometry g;
  g.kind_ = Kind::kBox;
  g.box_ = std::move(box);
  return g;
}

ShardGeometry ShardGeometry::FromRuns(std::vector<FlatRun> runs) {
  ShardGeometry g;
  g.kind_ = Kind::kRuns;
  g.runs_ = std::move(runs);
  return g;
}

Status ShardGeometry::Validate(const std::vector<int64_t>& shape) const {
  HY_ASSIGN_OR_RETURN(const int64_t numel, ShapeNumElements(shape));
  if (kind_ == Kind::kBox) {
    const size_t rank = shape.size();
    if (box_.offsets.size() != rank || box_.sizes.size() != rank) {
      return Status::InvalidArgument(
          "box with " + std::to_string(box_.offsets.size()) + " offsets and " +
          std::to_string(box_.sizes.size()) + " sizes for shape " +
          ShapeString(shape) + " of rank " + std::to_string(rank));
    }
    for (size_t d = 0; d < rank; ++d) {
      const int64_t off = box_.offsets[d];
      const int64_t size = box_.sizes[d];
      // With off, size >= 0, "off <= dim - size" cannot overflow.
      if (off < 0 || size < 0 || size > shape[d] || off > shape[d] - size) {
        return Status::InvalidArgument(
            "box dimension " + std::to_string(d) + " (offset " +
            std::to_string(off) + ", size " + std::to_string(size) +
            ") does not fit in " + std::to_string(shape[d]) + " of shape " +
            ShapeString(shape));
      }
    }
    return Status::OK();
  }
  HY_RETURN_IF_ERROR(CheckRunsShapeFree(runs_));
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (runs_[i].end() > numel) {
      return Status::InvalidArgument(
          "run " + std::to_string(i) + " " + RunString(runs_[i]) +
          " reaches past the " + std::to_string(numel) + " elements of shape " +
          ShapeString(shape));
    }
  }
  return Status::OK();
}

int64_t ShardGeometry::NumElements() const {
  if (kind_ == Kind::kRuns) {
    int64_t n = 0;
    for (const FlatRun& r : runs_) {
      if (r.length < 0 || n > kInt64Max - r.length) return -1;
      n += r.length;
    }
    return n;
  }
  const std::vector<int64_t>& sizes = box_.sizes;
  if (std::any_of(sizes.begin(), sizes.end(), [](int64_t s) { return s < 0; }))
    return -1;
  if (std::count(sizes.begin(), sizes.end(), 0) > 0) return 0;
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (n > kInt64Max / s) return -1;
    n *= s;
  }
  return n;
}

Result<std::vector<FlatRun>> ShardGeometry::ToFlatRuns(
    const std::vector<int64_t>& shape) const {
  HY_RETURN_IF_ERROR(Validate(shape));
  std::vector<FlatRun> out;
  if (kind_ == Kind::kRuns) {
    out.reserve(runs_.size());
    for (const FlatRun& r : runs_) AppendMerged(&out, r);
    return out;
  }
  const int rank = static_cast<int>(shape.size());
  if (rank == 0) return std::vector<FlatRun>{FlatRun{0, 1}};
  if (NumElements() == 0) return out;

  // Row-major strides; they fit int64 since the shape's numel does.
  std::vector<int64_t> stride(rank);
  stride[rank - 1] = 1;
  for (int d = rank - 1; d > 0; --d) stride[d - 1] = stride[d] * shape[d];

  // Collapse trailing dimensions the box covers fully: dimensions [inner,
  // rank) form one contiguous block of `block` elements per outer index.
  int inner = rank - 1;
  int64_t block = box_.sizes[inner];
  while (inner > 0 && box_.sizes[inner] == shape[inner]) {
    --inner;
    block *= box_.sizes[inner];
  }
  int64_t base = 0;
  for (int d = 0; d < rank; ++d) base += box_.offsets[d] * stride[d];

  // Odometer over the outer dimensions [0, inner).
  int64_t count = 1;
  for (int d = 0; d < inner; ++d) count *= box_.sizes[d];
  out.reserve(static_cast<size_t>(count));
  std::vector<int64_t> index(inner, 0);
  int64_t offset = base;
  for (int64_t k = 0; k < count; ++k) {
    AppendMerged(&out, FlatRun{offset, block});
    for (int d = inner - 1; d >= 0; --d) {
      if (++index[d] < box_.sizes[d]) {
        offset += stride[d];
        break;
      }
      offset -= (index[d] - 1) * stride[d];
      index[d] = 0;
    }
  }
  return out;
}

std::string ShardGeometry::ToString() const {
  std::string out;
  if (kind_ == Kind::kBox) {
    out = "box[";
    const size_t rank = std::min(box_.offsets.size(), box_.sizes.size());
    for (size_t d = 0; d < rank; ++d) {
      if (d) out += ',';
      out += std::to_string(box_.offsets[d]);
      out += ':';
      // Computed in unsigned arithmetic so that an invalid box still prints.
      out += std::to_string(
          static_cast<int64_t>(static_cast<uint64_t>(box_.offsets[d]) +
                               static_cast<uint64_t>(box_.sizes[d])));
    }
    out += ']';
    return out;
  }
  out = "runs[";
  for (size_t i = 0; i < runs_.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(runs_[i].offset);
    out += '+';
    out += std::to_string(runs_[i].length);
  }
  out += ']';
  return out;
}

Result<ShardGeometry> ShardGeometry::Parse(std::string_view text) {
  Parser p(text);
  if (p.Consume("box[")) {
    Box box;
    while (!p.Peek(']')) {
      if (!box.offsets.empty()) HY_RETURN_IF_ERROR(p.Expect(","));
      HY_ASSIGN_OR_RETURN(const int64_t begin, p.Int());
      HY_RETURN_IF_ERROR(p.Expect(":"));
      HY_ASSIGN_OR_RETURN(const int64_t end, p.Int());
      if (end < begin) return p.Error("range end before its begin");
      box.offsets.push_back(begin);
      box.sizes.push_back(end - begin);
    }
    HY_RETURN_IF_ERROR(p.Expect("]"));
    if (!p.AtEnd()) return p.Error("trailing characters");
    return FromBox(std::move(box));
  }
  if (p.Consume("runs[")) {
    std::vector<FlatRun> runs;
    while (!p.Peek(']')) {
      if (!runs.empty()) HY_RETURN_IF_ERROR(p.Expect(","));
      HY_ASSIGN_OR_RETURN(const int64_t offset, p.Int());
      HY_RETURN_IF_ERROR(p.Expect("+"));
      HY_ASSIGN_OR_RETURN(const int64_t length, p.Int());
      if (length == 0) return p.Error("run of length 0");
      if (offset > kInt64Max - length) return p.Error("run end beyond int64");
      runs.push_back(FlatRun{offset, length});
    }
    HY_RETURN_IF_ERROR(p.Expect("]"));
    if (!p.AtEnd()) return p.Error("trailing characters");
    Status s = CheckRunsShapeFree(runs);
    if (!s.ok()) return p.Error(s.message());
    return FromRuns(std::move(runs));
  }
  return p.Error("expected 'box[' or 'runs['");
}

int64_t TotalLength(const std::vector<FlatRun>& runs) {
  int64_t n = 0;
  for (const FlatRun& r : runs) n += r.length;
  return n;
}

std::vector<RunOverlap> IntersectRuns(const std::vector<FlatRun>& shard_runs,
                                      FlatRun range) {
  std::vector<RunOverlap> out;
  if (range.length <= 0) return out;
  const int64_t range_end = range.end();
  int64_t local = 0;
  for (const FlatRun& r : shard_runs) {
    const int64_t begin = std::max(r.offset, range.offset);
    const int64_t end = std::min(r.end(), range_end);
    if (begin < end) {
      out.push_back(RunOverlap{local + (begin - r.offset), begin, end - begin});
    }
    local += r.length;
  }
  return out;
}

Status CheckExactCover(const std::vector<std::vector<FlatRun>>& shards,
                       int64_t numel) {
  if (numel < 0) {
    return Status::InvalidArgument("negative element count " +
                                   std::to_string(numel));
  }
  struct Entry {
    FlatRun run;
    size_t shard;
    size_t index;
  };
  std::vector<Entry> all;
  for (size_t s = 0; s < shards.size(); ++s) {
    for (size_t i = 0; i < shards[s].size(); ++i) {
      const FlatRun& r = shards[s][i];
      const std::string where =
          "shard " + std::to_string(s) + " run " + std::to_string(i);
      if (r.offset < 0 || r.length <= 0) {
        return Status::InvalidArgument(
            where + " (offset " + std::to_string(r.offset) + ", length " +
            std::to_string(r.length) + ") needs offset >= 0 and length > 0");
      }
      if (r.offset > numel || r.length > numel - r.offset) {
        return Status::InvalidArgument(
            where + " (offset " + std::to_string(r.offset) + ", length " +
            std::to_string(r.length) + ") reaches past the " +
            std::to_string(numel) + " elements");
      }
      all.push_back(Entry{r, s, i});
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) {
    return a.run.offset < b.run.offset;
  });
  int64_t covered = 0;          // [0, covered) is covered exactly once.
  const Entry* last = nullptr;  // The run that ends at `covered`.
  for (const Entry& e : all) {
    if (e.run.offset > covered) {
      return Status::InvalidArgument(
          "elements " + RunString(FlatRun{covered, e.run.offset - covered}) +
          " are covered by no shard");
    }
    if (e.run.offset < covered) {
      const int64_t end = std::min(covered, e.run.end());
      return Status::InvalidArgument(
          "elements " + RunString(FlatRun{e.run.offset, end - e.run.offset}) +
          " are covered twice: by shard " + std::to_string(last->shard) +
          " run " + std::to_string(last->index) + " and shard " +
          std::to_string(e.shard) + " run " + std::to_string(e.index));
    }
    covered = e.run.end();
    last = &e;
  }
  if (covered < numel) {
    return Status::InvalidArgument(
        "elements " + RunString(FlatRun{covered, numel - covered}) +
        " are covered by no shard");
  }
  return Status::OK();
}

}  // namespace hy
