#include "hy/common/shard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace hy {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

using Runs = std::vector<FlatRun>;

ShardGeometry MakeBox(std::vector<int64_t> offsets,
                      std::vector<int64_t> sizes) {
  return ShardGeometry::FromBox(Box{std::move(offsets), std::move(sizes)});
}

Runs FlatRunsOrDie(const ShardGeometry& g, const std::vector<int64_t>& shape) {
  Result<Runs> r = g.ToFlatRuns(shape);
  EXPECT_TRUE(r.ok()) << r.status() << " for " << g.ToString();
  return r.ok() ? *r : Runs{};
}

// The global element indices of `runs`, in order.
std::vector<int64_t> Expand(const Runs& runs) {
  std::vector<int64_t> out;
  for (const FlatRun& r : runs) {
    for (int64_t k = 0; k < r.length; ++k) out.push_back(r.offset + k);
  }
  return out;
}

// Reference: the box's elements, one by one in row-major order.
std::vector<int64_t> BoxElements(const Box& box,
                                 const std::vector<int64_t>& shape) {
  const size_t rank = shape.size();
  std::vector<int64_t> out;
  for (int64_t s : box.sizes) {
    if (s == 0) return out;
  }
  std::vector<int64_t> idx(rank, 0);
  while (true) {
    int64_t flat = 0;
    for (size_t d = 0; d < rank; ++d) {
      flat = flat * shape[d] + box.offsets[d] + idx[d];
    }
    out.push_back(flat);
    size_t d = rank;
    while (d > 0 && ++idx[d - 1] == box.sizes[d - 1]) idx[--d] = 0;
    if (d == 0) return out;
  }
}

TEST(ShardGeometryTest, WholeTensorAndAccessors) {
  ShardGeometry g = ShardGeometry::WholeTensor({4, 6});
  EXPECT_EQ(g.kind(), ShardGeometry::Kind::kBox);
  EXPECT_EQ(g.box(), (Box{{0, 0}, {4, 6}}));
  EXPECT_EQ(g.NumElements(), 24);
  EXPECT_TRUE(g.Validate({4, 6}).ok());
  EXPECT_EQ(FlatRunsOrDie(g, {4, 6}), (Runs{{0, 24}}));
  EXPECT_EQ(g.ToString(), "box[0:4,0:6]");

  ShardGeometry r = ShardGeometry::FromRuns({{5, 2}, {0, 3}});
  EXPECT_EQ(r.kind(), ShardGeometry::Kind::kRuns);
  EXPECT_EQ(r.runs(), (Runs{{5, 2}, {0, 3}}));
  EXPECT_EQ(r.NumElements(), 5);
  EXPECT_EQ(ShardGeometry(), ShardGeometry::WholeTensor({}));
}

TEST(ShardGeometryTest, BoxToRuns1d) {
  EXPECT_EQ(FlatRunsOrDie(MakeBox({2}, {3}), {10}), (Runs{{2, 3}}));
  EXPECT_EQ(FlatRunsOrDie(MakeBox({0}, {10}), {10}), (Runs{{0, 10}}));
  EXPECT_EQ(FlatRunsOrDie(MakeBox({10}, {0}), {10}), Runs{});
}

TEST(ShardGeometryTest, BoxToRuns2d) {
  // Rows [1,3), columns [2,5) of a [4,6] matrix.
  EXPECT_EQ(FlatRunsOrDie(MakeBox({1, 2}, {2, 3}), {4, 6}),
            (Runs{{8, 3}, {14, 3}}));
  // Full rows merge into one run.
  EXPECT_EQ(FlatRunsOrDie(MakeBox({1, 0}, {2, 6}), {4, 6}), (Runs{{6, 12}}));
  // One column: one run per row.
  EXPECT_EQ(FlatRunsOrDie(MakeBox({0, 5}, {4, 1}), {4, 6}),
            (Runs{{5, 1}, {11, 1}, {17, 1}, {23, 1}}));
  // Empty in either dimension.
  EXPECT_EQ(FlatRunsOrDie(MakeBox({1, 2}, {0, 3}), {4, 6}), Runs{});
  EXPECT_EQ(FlatRunsOrDie(MakeBox({1, 2}, {2, 0}), {4, 6}), Runs{});
  EXPECT_EQ(MakeBox({1, 2}, {2, 0}).NumElements(), 0);
  // A shape with a zero dimension holds nothing.
  EXPECT_EQ(FlatRunsOrDie(ShardGeometry::WholeTensor({3, 0, 2}), {3, 0, 2}),
            Runs{});
}

TEST(ShardGeometryTest, BoxToRuns3d) {
  const std::vector<int64_t> shape = {2, 3, 4};
  // Last dim full, middle partial: the block is 2*4 elements per outer index.
  EXPECT_EQ(FlatRunsOrDie(MakeBox({0, 1, 0}, {2, 2, 4}), shape),
            (Runs{{4, 8}, {16, 8}}));
  // Two trailing dims full: one run.
  EXPECT_EQ(FlatRunsOrDie(MakeBox({1, 0, 0}, {1, 3, 4}), shape),
            (Runs{{12, 12}}));
  // Innermost partial: one run per (i, j).
  EXPECT_EQ(FlatRunsOrDie(MakeBox({0, 1, 1}, {2, 2, 2}), shape),
            (Runs{{5, 2}, {9, 2}, {17, 2}, {21, 2}}));
  // Size-1 dims of the shape are always full.
  EXPECT_EQ(FlatRunsOrDie(MakeBox({0, 0, 0}, {2, 1, 3}), {3, 1, 3}),
            (Runs{{0, 6}}));
}

TEST(ShardGeometryTest, Scalar) {
  ShardGeometry g = ShardGeometry::WholeTensor({});
  EXPECT_TRUE(g.Validate({}).ok());
  EXPECT_EQ(g.NumElements(), 1);
  EXPECT_EQ(FlatRunsOrDie(g, {}), (Runs{{0, 1}}));
  EXPECT_EQ(g.ToString(), "box[]");
  EXPECT_TRUE(g.Validate({1}).IsInvalidArgument());
  EXPECT_TRUE(MakeBox({0}, {1}).Validate({}).IsInvalidArgument());
  EXPECT_TRUE(ShardGeometry::FromRuns({{0, 1}}).Validate({}).ok());
  EXPECT_TRUE(
      ShardGeometry::FromRuns({{1, 1}}).Validate({}).IsInvalidArgument());
}

TEST(ShardGeometryTest, RandomBoxesMatchElementwiseReference) {
  std::mt19937_64 rng(42);
  for (int iter = 0; iter < 3000; ++iter) {
    const int rank = static_cast<int>(rng() % 5);
    std::vector<int64_t> shape(rank);
    Box box;
    for (int d = 0; d < rank; ++d) {
      shape[d] = static_cast<int64_t>(rng() % 6);
      // Bias towards full dimensions so that collapsing is exercised.
      const int64_t size = rng() % 3 == 0
                               ? shape[d]
                               : static_cast<int64_t>(rng() % (shape[d] + 1));
      box.sizes.push_back(size);
      box.offsets.push_back(
          static_cast<int64_t>(rng() % (shape[d] - size + 1)));
    }
    ShardGeometry g = ShardGeometry::FromBox(box);
    ASSERT_TRUE(g.Validate(shape).ok()) << g.ToString();
    Runs runs = FlatRunsOrDie(g, shape);
    ASSERT_EQ(Expand(runs), BoxElements(box, shape)) << g.ToString();
    EXPECT_EQ(TotalLength(runs), g.NumElements());
    for (size_t i = 1; i < runs.size(); ++i) {
      EXPECT_NE(runs[i - 1].end(), runs[i].offset) << "unmerged runs";
    }
    for (const FlatRun& r : runs) EXPECT_GT(r.length, 0);
  }
}

TEST(ShardGeometryTest, BoxValidation) {
  const std::vector<int64_t> shape = {4, 6};
  EXPECT_TRUE(MakeBox({4, 6}, {0, 0}).Validate(shape).ok());
  EXPECT_TRUE(MakeBox({0}, {4}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(MakeBox({0, 0}, {4}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(MakeBox({-1, 0}, {1, 1}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(MakeBox({0, 0}, {1, -1}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(MakeBox({0, 5}, {1, 2}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(MakeBox({5, 0}, {0, 1}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(MakeBox({0, 0}, {1, 1}).Validate({4, -6}).IsInvalidArgument());
  Status s = MakeBox({0, 5}, {1, 2}).Validate(shape);
  EXPECT_NE(s.message().find("dimension 1"), std::string_view::npos) << s;
  EXPECT_TRUE(MakeBox({0, 5}, {1, 2}).ToFlatRuns(shape).status() ==
              s);  // ToFlatRuns fails as Validate does.
}

TEST(ShardGeometryTest, RunsValidationAndOrder) {
  const std::vector<int64_t> shape = {4, 6};
  auto runs = [](Runs r) { return ShardGeometry::FromRuns(std::move(r)); };
  EXPECT_TRUE(runs({}).Validate(shape).ok());
  EXPECT_TRUE(runs({{10, 4}, {0, 5}, {20, 4}}).Validate(shape).ok());
  EXPECT_TRUE(runs({{0, 5}, {4, 2}}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(runs({{10, 4}, {0, 24}}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(runs({{3, 1}, {3, 1}}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(runs({{20, 5}}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(runs({{24, 1}}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(runs({{2, 0}}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(runs({{-1, 2}}).Validate(shape).IsInvalidArgument());
  EXPECT_TRUE(runs({{1, -1}}).Validate(shape).IsInvalidArgument());
  Status s = runs({{10, 4}, {0, 5}, {4, 2}}).Validate(shape);
  EXPECT_NE(s.message().find("overlap"), std::string_view::npos) << s;

  // List order is kept; only neighbours in the list that touch are merged.
  EXPECT_EQ(
      FlatRunsOrDie(runs({{0, 2}, {2, 3}, {10, 1}, {5, 1}, {6, 1}}), shape),
      (Runs{{0, 5}, {10, 1}, {5, 2}}));
  EXPECT_EQ(FlatRunsOrDie(runs({{2, 3}, {0, 2}}), shape),
            (Runs{{2, 3}, {0, 2}}));
}

TEST(ShardGeometryTest, OverflowIsAnErrorNotUndefined) {
  // Element counts beyond int64.
  EXPECT_TRUE(ShardGeometry::WholeTensor({int64_t{1} << 62, 4})
                  .Validate({int64_t{1} << 62, 4})
                  .IsInvalidArgument());
  EXPECT_TRUE(MakeBox({0, 0}, {1, 1})
                  .Validate({int64_t{1} << 40, int64_t{1} << 40})
                  .IsInvalidArgument());
  EXPECT_EQ(MakeBox({0, 0}, {int64_t{1} << 40, int64_t{1} << 40}).NumElements(),
            -1);
  EXPECT_EQ(ShardGeometry::FromRuns({{0, kMax}, {kMax, kMax}}).NumElements(),
            -1);
  EXPECT_EQ(MakeBox({0}, {-3}).NumElements(), -1);
  // offset + size would overflow.
  EXPECT_TRUE(MakeBox({kMax}, {kMax}).Validate({kMax}).IsInvalidArgument());
  EXPECT_TRUE(MakeBox({1}, {kMax}).Validate({kMax}).IsInvalidArgument());
  EXPECT_TRUE(MakeBox({kMax}, {0}).Validate({kMax}).ok());
  EXPECT_TRUE(ShardGeometry::FromRuns({{kMax, kMax}})
                  .Validate({kMax})
                  .IsInvalidArgument());
  EXPECT_TRUE(ShardGeometry::FromRuns({{kMax - 1, 2}})
                  .Validate({kMax})
                  .IsInvalidArgument());
  EXPECT_TRUE(ShardGeometry::FromRuns({{kMax - 1, 1}}).Validate({kMax}).ok());
  // The largest tensor still converts, with large strides.
  EXPECT_EQ(FlatRunsOrDie(ShardGeometry::WholeTensor({kMax}), {kMax}),
            (Runs{{0, kMax}}));
  const int64_t big = int64_t{1} << 61;
  EXPECT_EQ(FlatRunsOrDie(MakeBox({0, 1}, {2, 1}), {2, big}),
            (Runs{{1, 1}, {big + 1, 1}}));
  EXPECT_EQ(FlatRunsOrDie(MakeBox({1, 0}, {1, big}), {2, big}),
            (Runs{{big, big}}));
}

// Parse that must succeed (a failure is reported and gives a runs[] shard).
ShardGeometry ParseOk(std::string_view text) {
  Result<ShardGeometry> g = ShardGeometry::Parse(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : ShardGeometry::FromRuns({});
}

TEST(ShardGeometryTest, TextForm) {
  EXPECT_EQ(MakeBox({0, 128}, {64, 128}).ToString(), "box[0:64,128:256]");
  EXPECT_EQ(ShardGeometry::FromRuns({{0, 100}, {200, 50}}).ToString(),
            "runs[0+100,200+50]");
  EXPECT_EQ(ShardGeometry::FromRuns({}).ToString(), "runs[]");
  EXPECT_EQ(ParseOk("box[0:64,128:256]"), MakeBox({0, 128}, {64, 128}));
  EXPECT_EQ(ParseOk("runs[200+50,0+100]"),
            ShardGeometry::FromRuns({{200, 50}, {0, 100}}));
  EXPECT_EQ(ParseOk("box[]"), ShardGeometry::WholeTensor({}));
  EXPECT_EQ(ParseOk("runs[]").kind(), ShardGeometry::Kind::kRuns);
  EXPECT_TRUE(ParseOk("runs[]").runs().empty());
  EXPECT_NE(ParseOk("runs[]"), ShardGeometry::WholeTensor({}));
  EXPECT_EQ(ParseOk("box[3:3,0:9223372036854775807]"),
            MakeBox({3, 0}, {0, kMax}));
}

TEST(ShardGeometryTest, TextRoundTripOfGeneratedGeometries) {
  std::mt19937_64 rng(7);
  auto number = [&rng](int64_t limit) {  // In [0, limit], often small.
    if (limit <= 0) return int64_t{0};
    switch (rng() % 3) {
      case 0:
        return std::min(static_cast<int64_t>(rng() % 10), limit);
      case 1:
        return limit - std::min(static_cast<int64_t>(rng() % 3), limit);
      default:
        return static_cast<int64_t>(rng() % (static_cast<uint64_t>(limit) + 1));
    }
  };
  for (int iter = 0; iter < 2000; ++iter) {
    ShardGeometry g;
    if (rng() % 2) {
      Box box;
      for (int d = static_cast<int>(rng() % 6); d > 0; --d) {
        box.offsets.push_back(number(kMax));
        box.sizes.push_back(number(kMax - box.offsets.back()));
      }
      g = ShardGeometry::FromBox(std::move(box));
    } else {
      Runs runs;
      int64_t pos = number(1000);
      for (int k = static_cast<int>(rng() % 6); k > 0 && pos < kMax; --k) {
        const int64_t length =
            1 + number(std::min<int64_t>(kMax - pos, 1 << 20) - 1);
        runs.push_back({pos, length});
        pos += length;
        if (pos < kMax) pos += number(std::min<int64_t>(kMax - pos, 1000));
      }
      std::shuffle(runs.begin(), runs.end(), rng);
      g = ShardGeometry::FromRuns(std::move(runs));
    }
    const std::string text = g.ToString();
    Result<ShardGeometry> parsed = ShardGeometry::Parse(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, g) << text;
    EXPECT_EQ(parsed->ToString(), text);
  }
}

TEST(ShardGeometryTest, ParseRejectsJunk) {
  // clang-format off
  const char* junk[] = {
      "", "box", "box[", "box[0:1", "box[0:1,]", "box[,]", "box[:1]", "box[0:]",
      "box[0:1:2]", "box[1:0]", "box[ 0:1]", "box[0:1] ", " box[0:1]",
      "box[-1:2]", "box[+1:2]", "box[01:2]", "box[0:9223372036854775808]",
      "box[0:99999999999999999999999]", "box[0:1]x", "box[]]", "Box[0:1]",
      "box(0:1)", "runs[0+0]", "runs[0+5,3+5]", "runs[4+1,4+1]",
      "runs[9223372036854775807+1]", "runs[0-5]", "runs[0:5]", "runs[+1]",
      "runs[1+]", "runs[,]", "runs[0+1,]", "runs[0+1]]", "runs[0x10+1]"};
  // clang-format on
  for (const char* text : junk) {
    Result<ShardGeometry> g = ShardGeometry::Parse(text);
    EXPECT_TRUE(g.status().IsInvalidArgument()) << "'" << text << "'";
    EXPECT_NE(g.status().message().find("position"), std::string_view::npos)
        << g.status();
  }
  // An embedded NUL is junk too.
  EXPECT_FALSE(ShardGeometry::Parse(std::string_view("box[0:1]\0", 9)).ok());
  Status s = ShardGeometry::Parse("box[0:1,2;3]").status();
  EXPECT_NE(s.message().find("expected ':' at position 9"),
            std::string_view::npos)
      << s;
}

// A random set of non-overlapping runs over [0, numel), in random order.
Runs RandomRuns(std::mt19937_64& rng, int64_t numel) {
  Runs runs;
  int64_t pos = 0;
  while (pos < numel) {
    const int64_t length =
        1 +
        static_cast<int64_t>(
            rng() % static_cast<uint64_t>(std::min<int64_t>(8, numel - pos)));
    if (rng() % 2) runs.push_back({pos, length});
    pos += length;
  }
  std::shuffle(runs.begin(), runs.end(), rng);
  return runs;
}

TEST(IntersectRunsTest, MatchesElementwiseReference) {
  std::mt19937_64 rng(3);
  for (int iter = 0; iter < 3000; ++iter) {
    const int64_t numel = static_cast<int64_t>(rng() % 60);
    const Runs shard = RandomRuns(rng, numel);
    FlatRun range{static_cast<int64_t>(rng() % (numel + 5)),
                  static_cast<int64_t>(rng() % (numel + 5))};
    // Reference: every (local, global) pair of the shard inside the range.
    std::vector<std::pair<int64_t, int64_t>> want;
    const std::vector<int64_t> global = Expand(shard);
    for (size_t local = 0; local < global.size(); ++local) {
      if (global[local] >= range.offset && global[local] < range.end()) {
        want.emplace_back(static_cast<int64_t>(local), global[local]);
      }
    }
    std::vector<std::pair<int64_t, int64_t>> got;
    for (const RunOverlap& o : IntersectRuns(shard, range)) {
      ASSERT_GT(o.length, 0);
      for (int64_t k = 0; k < o.length; ++k) {
        got.emplace_back(o.local_offset + k, o.global_offset + k);
      }
    }
    ASSERT_EQ(got, want) << ShardGeometry::FromRuns(shard).ToString() << " ["
                         << range.offset << "+" << range.length << "]";
  }
}

TEST(IntersectRunsTest, Examples) {
  const Runs shard = {{8, 3}, {14, 3}};  // Rows 1-2, columns 2-4 of [4,6].
  EXPECT_EQ(IntersectRuns(shard, {0, 24}),
            (std::vector<RunOverlap>{{0, 8, 3}, {3, 14, 3}}));
  EXPECT_EQ(IntersectRuns(shard, {9, 6}),
            (std::vector<RunOverlap>{{1, 9, 2}, {3, 14, 1}}));
  EXPECT_TRUE(IntersectRuns(shard, {11, 3}).empty());
  EXPECT_TRUE(IntersectRuns(shard, {8, 0}).empty());
  EXPECT_TRUE(IntersectRuns({}, {0, 10}).empty());
}

TEST(CheckExactCoverTest, TensorParallelSplits) {
  const std::vector<int64_t> shape = {4, 6};
  // tp=2 column split: two boxes of 4 runs each.
  Runs left = FlatRunsOrDie(MakeBox({0, 0}, {4, 3}), shape);
  Runs right = FlatRunsOrDie(MakeBox({0, 3}, {4, 3}), shape);
  EXPECT_EQ(left.size(), 4u);
  EXPECT_TRUE(CheckExactCover({left, right}, 24).ok());
  EXPECT_TRUE(CheckExactCover({right, left}, 24).ok());
  // Row split.
  EXPECT_TRUE(CheckExactCover({FlatRunsOrDie(MakeBox({0, 0}, {2, 6}), shape),
                               FlatRunsOrDie(MakeBox({2, 0}, {2, 6}), shape)},
                              24)
                  .ok());
  // Columns overlapping by one.
  Runs wide = FlatRunsOrDie(MakeBox({0, 0}, {4, 4}), shape);
  Status s = CheckExactCover({wide, right}, 24);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("elements [3, 4) are covered twice"),
            std::string_view::npos)
      << s;
  // A column missing.
  Runs narrow = FlatRunsOrDie(MakeBox({0, 0}, {4, 2}), shape);
  s = CheckExactCover({narrow, right}, 24);
  EXPECT_NE(s.message().find("elements [2, 3) are covered by no shard"),
            std::string_view::npos)
      << s;
  // Only the top half.
  s = CheckExactCover({FlatRunsOrDie(MakeBox({0, 0}, {2, 6}), shape)}, 24);
  EXPECT_NE(s.message().find("[12, 24) are covered by no shard"),
            std::string_view::npos)
      << s;
}

TEST(CheckExactCoverTest, FlatShardsAndBadInput) {
  // FSDP-style: 24 elements over 5 ranks of 5, the last one short.
  std::vector<Runs> fsdp;
  for (int64_t r = 0; r < 5; ++r) {
    fsdp.push_back({{r * 5, std::min<int64_t>(5, 24 - r * 5)}});
  }
  EXPECT_TRUE(CheckExactCover(fsdp, 24).ok());
  EXPECT_TRUE(CheckExactCover(fsdp, 25).IsInvalidArgument());
  EXPECT_TRUE(CheckExactCover(fsdp, 23).IsInvalidArgument());
  EXPECT_TRUE(CheckExactCover({}, 0).ok());
  EXPECT_TRUE(CheckExactCover({{}, {}}, 0).ok());
  EXPECT_TRUE(CheckExactCover({}, 1).IsInvalidArgument());
  EXPECT_TRUE(CheckExactCover({}, -1).IsInvalidArgument());
  EXPECT_TRUE(CheckExactCover({{{0, 0}, {0, 4}}}, 4).IsInvalidArgument());
  EXPECT_TRUE(CheckExactCover({{{-1, 5}}}, 4).IsInvalidArgument());
  EXPECT_TRUE(CheckExactCover({{{kMax, kMax}}}, kMax).IsInvalidArgument());
  // Overlap within one shard, and a run contained in another.
  EXPECT_TRUE(CheckExactCover({{{0, 3}, {2, 2}}}, 4).IsInvalidArgument());
  Status s = CheckExactCover({{{0, 10}}, {{7, 2}}}, 10);
  EXPECT_NE(s.message().find("[7, 9) are covered twice: by shard 0 run 0 and "
                             "shard 1 run 0"),
            std::string_view::npos)
      << s;
}

TEST(CheckExactCoverTest, RandomPartitions) {
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < 500; ++iter) {
    const int64_t numel = 1 + static_cast<int64_t>(rng() % 50);
    std::vector<Runs> shards(1 + rng() % 4);
    for (int64_t pos = 0; pos < numel;) {
      const int64_t len = 1 + static_cast<int64_t>(rng() % (numel - pos));
      shards[rng() % shards.size()].push_back({pos, len});
      pos += len;
    }
    for (Runs& r : shards) std::shuffle(r.begin(), r.end(), rng);
    ASSERT_TRUE(CheckExactCover(shards, numel).ok());
    // Growing or shrinking any one run breaks the cover.
    Runs& victim = shards[rng() % shards.size()];
    if (victim.empty()) continue;
    FlatRun& run = victim[rng() % victim.size()];
    run.length += (run.length > 1 && rng() % 2) ? -1 : 1;
    EXPECT_TRUE(CheckExactCover(shards, numel).IsInvalidArgument());
  }
}

}  // namespace
}  // namespace hy
