// Plan(): which source rank sends which runs to which destination rank.
// Steps (bucketing) are cut in plan_steps.cc.

#include <algorithm>
#include <chrono>
#include <string>

#include "hy/common/dtype.h"
#include "hy/reshard/plan.h"
#include "plan_internal.h"

namespace hy::reshard {
namespace {

// A source piece: global elements [begin, end) of a tensor, found at
// `local` in `rank`'s source shard buffer.
struct Piece {
  int64_t begin = 0;
  int64_t end = 0;
  int rank = 0;
  int64_t local = 0;
};

struct Holder {
  int rank = 0;
  int64_t local = 0;  // Local offset of the segment's first element.
};

// A maximal global range over which the set of holders does not change.
struct Segment {
  int64_t begin = 0;
  int64_t end = 0;
  std::vector<Holder> holders;  // Sorted by rank.
};

std::vector<Segment> BuildSegments(std::vector<Piece> pieces) {
  std::vector<int64_t> bounds;
  bounds.reserve(pieces.size() * 2);
  for (const Piece& p : pieces) {
    bounds.push_back(p.begin);
    bounds.push_back(p.end);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.rank < b.rank);
  });
  std::vector<Segment> segments;
  std::vector<const Piece*> active;
  size_t next = 0;
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    int64_t lo = bounds[k];
    int64_t hi = bounds[k + 1];
    active.erase(std::remove_if(active.begin(), active.end(),
                                [lo](const Piece* p) { return p->end <= lo; }),
                 active.end());
    while (next < pieces.size() && pieces[next].begin <= lo) {
      if (pieces[next].end > lo) active.push_back(&pieces[next]);
      ++next;
    }
    if (active.empty()) continue;
    Segment seg;
    seg.begin = lo;
    seg.end = hi;
    for (const Piece* p : active) {
      seg.holders.push_back({p->rank, p->local + (lo - p->begin)});
    }
    std::sort(seg.holders.begin(), seg.holders.end(),
              [](const Holder& a, const Holder& b) { return a.rank < b.rank; });
    // Merge with the previous segment when it continues it exactly.
    if (!segments.empty()) {
      Segment& prev = segments.back();
      bool same = prev.end == lo && prev.holders.size() == seg.holders.size();
      for (size_t h = 0; same && h < seg.holders.size(); ++h) {
        same = prev.holders[h].rank == seg.holders[h].rank &&
               prev.holders[h].local + (lo - prev.begin) ==
                   seg.holders[h].local;
      }
      if (same) {
        prev.end = hi;
        continue;
      }
    }
    segments.push_back(std::move(seg));
  }
  return segments;
}

void Emit(std::vector<Transfer>* out, const Transfer& t) {
  if (!out->empty()) {
    Transfer& b = out->back();
    if (b.tensor == t.tensor && b.src_rank == t.src_rank &&
        b.dst_rank == t.dst_rank && b.src_offset + b.length == t.src_offset &&
        b.dst_offset + b.length == t.dst_offset) {
      b.length += t.length;
      return;
    }
  }
  out->push_back(t);
}

}  // namespace

Result<TransferPlan> Plan(const Layout& src, const Layout& dst,
                          const ModelSpec& spec, const Topology& topology,
                          const PlanOptions& options) {
  auto start = std::chrono::steady_clock::now();
  if (topology.ranks_per_node < 1) {
    return Status::InvalidArgument("topology: ranks_per_node must be >= 1");
  }
  if (options.bucket_bytes < 1) {
    return Status::InvalidArgument("plan: bucket_bytes must be >= 1");
  }
  if (std::max(src.world_size(), dst.world_size()) != topology.world_size) {
    return Status::InvalidArgument(
        "world size mismatch: source layout " + src.ToString() + " has " +
        std::to_string(src.world_size()) + " ranks, destination layout " +
        dst.ToString() + " has " + std::to_string(dst.world_size()) +
        ", the job has " + std::to_string(topology.world_size) +
        " (it must have the larger of the two)");
  }
  TransferPlan plan;
  plan.spec = spec;
  HY_ASSIGN_OR_RETURN(plan.src, ShardMap::Build(src, spec));
  HY_ASSIGN_OR_RETURN(plan.dst, ShardMap::Build(dst, spec));
  plan.topology = topology;
  plan.bucket_bytes = options.bucket_bytes;

  const int world = topology.world_size;
  const int n = static_cast<int>(spec.tensors.size());
  std::vector<int64_t> load(world, 0);  // Bytes assigned per sender.
  std::vector<Transfer> network;
  for (int i = 0; i < n; ++i) {
    const int64_t es =
        static_cast<int64_t>(DTypeSize(spec.tensors[i].meta.dtype));
    std::vector<Piece> pieces;
    for (int r = 0; r < src.world_size(); ++r) {
      const RankShard& s = plan.src.Get(r, i);
      int64_t local = 0;
      for (const FlatRun& run : s.runs) {
        pieces.push_back({run.offset, run.end(), r, local});
        local += run.length;
      }
    }
    std::vector<Segment> segments = BuildSegments(std::move(pieces));
    for (int d = 0; d < dst.world_size(); ++d) {
      const RankShard& want = plan.dst.Get(d, i);
      int64_t dst_local = 0;
      for (const FlatRun& run : want.runs) {
        auto it = std::upper_bound(
            segments.begin(), segments.end(), run.offset,
            [](int64_t v, const Segment& s) { return v < s.end; });
        int64_t covered = run.offset;
        for (; it != segments.end() && it->begin < run.end(); ++it) {
          int64_t lo = std::max(run.offset, it->begin);
          int64_t hi = std::min(run.end(), it->end);
          if (lo != covered) break;  // A gap: reported below.
          const Holder* pick = nullptr;
          for (const Holder& h : it->holders) {
            if (h.rank == d) pick = &h;
          }
          if (pick == nullptr) {
            // Same node first, then the least-loaded sender.
            for (const Holder& h : it->holders) {
              bool near = topology.NodeOf(h.rank) == topology.NodeOf(d);
              if (pick == nullptr) {
                pick = &h;
                continue;
              }
              bool pick_near = topology.NodeOf(pick->rank) == topology.NodeOf(d);
              if (near != pick_near) {
                if (near) pick = &h;
              } else if (load[h.rank] < load[pick->rank]) {
                pick = &h;
              }
            }
          }
          Transfer t;
          t.tensor = i;
          t.src_rank = pick->rank;
          t.dst_rank = d;
          t.src_offset = pick->local + (lo - it->begin);
          t.dst_offset = dst_local + (lo - run.offset);
          t.length = hi - lo;
          int64_t bytes = t.length * es;
          if (pick->rank == d) {
            Emit(&plan.local, t);
            plan.stats.local_bytes += bytes;
          } else {
            load[pick->rank] += bytes;
            Emit(&network, t);
            if (topology.NodeOf(pick->rank) == topology.NodeOf(d)) {
              plan.stats.same_node_bytes += bytes;
            } else {
              plan.stats.cross_node_bytes += bytes;
            }
          }
          covered = hi;
        }
        if (covered != run.end()) {
          return Status::Internal(
              "plan: elements [" + std::to_string(covered) + ", " +
              std::to_string(run.end()) + ") of tensor " +
              spec.tensors[i].meta.name + " needed by rank " +
              std::to_string(d) + " are held by no source rank");
        }
        dst_local += run.length;
      }
      plan.stats.dst_bytes += want.num_elements * es;
    }
  }
  internal::CutSteps(std::move(network), &plan);
  plan.stats.plan_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return plan;
}

Result<Layout> RolloutLayoutFor(const Layout& train, int rollout_tp) {
  const int t = train.tp();
  if (train.fsdp() != 1) {
    return Status::InvalidArgument("RolloutLayoutFor: training layout " +
                                   train.ToString() + " uses fsdp");
  }
  HY_ASSIGN_OR_RETURN(Layout plain,
                      Layout::Make(train.tp(), train.pp(), train.dp(), 1));
  if (plain != train) {
    return Status::InvalidArgument("RolloutLayoutFor: training layout " +
                                   train.ToString() +
                                   " does not use the default rank order");
  }
  if (rollout_tp < 1 || t % rollout_tp != 0) {
    return Status::InvalidArgument(
        "RolloutLayoutFor: rollout tp=" + std::to_string(rollout_tp) +
        " does not divide training tp=" + std::to_string(t));
  }
  const int world = train.world_size();
  const int k = t / rollout_tp;
  const int dp = world / rollout_tp;
  std::string text = "tp=" + std::to_string(rollout_tp) +
                     ",dp=" + std::to_string(dp);
  if (k > 1 && rollout_tp > 1) {
    text += dp == k ? ",order=dp-tp" : ",order=dp:" + std::to_string(k) + "-tp-dp";
  }
  return Layout::Parse(text);
}

}  // namespace hy::reshard
