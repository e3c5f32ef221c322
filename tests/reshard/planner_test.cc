#include <gtest/gtest.h>

#include <array>
#include <map>
#include <random>

#include "hy/reshard/plan.h"
#include "reshard_test_util.h"

namespace hy::reshard {
namespace {

using testing::MakeTensor;
using testing::TinyLlama;

Layout L(const std::string& text) {
  auto l = Layout::Parse(text);
  EXPECT_TRUE(l.ok()) << text << ": " << l.status();
  return *l;
}

// The lower bound, by brute force over elements: every destination element
// a rank does not already hold must cross the network once.
void ExpectOptimal(const TransferPlan& plan) {
  int64_t local = 0, network = 0;
  for (int t = 0; t < plan.src.num_tensors(); ++t) {
    int64_t es = DTypeSize(plan.spec.tensors[t].meta.dtype);
    int64_t numel = plan.spec.tensors[t].meta.NumElements().value();
    for (int d = 0; d < plan.topology.world_size; ++d) {
      std::vector<bool> held(numel, false);
      for (const FlatRun& r : plan.src.Get(d, t).runs) {
        for (int64_t i = r.offset; i < r.end(); ++i) held[i] = true;
      }
      for (const FlatRun& r : plan.dst.Get(d, t).runs) {
        for (int64_t i = r.offset; i < r.end(); ++i) {
          (held[i] ? local : network) += es;
        }
      }
    }
  }
  EXPECT_EQ(plan.stats.local_bytes, local);
  EXPECT_EQ(plan.stats.network_bytes(), network);
}

TEST(PlannerTest, SameLayoutIsAllLocal) {
  ModelSpec spec = TinyLlama(2);
  for (const char* text : {"fsdp=4", "tp=2,dp=2", "tp=2,pp=2"}) {
    auto plan = Plan(L(text), L(text), spec, Topology{4, 4});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->stats.network_bytes(), 0);
    EXPECT_TRUE(plan->steps.empty());
    EXPECT_EQ(plan->stats.local_bytes, plan->stats.dst_bytes);
  }
}

TEST(PlannerTest, MovesExactlyWhatIsNotLocal) {
  ModelSpec spec = TinyLlama(4);
  const char* layouts[] = {"fsdp=8",         "tp=2,fsdp=4", "tp=2,pp=2,dp=2",
                           "tp=8",           "dp=8",        "pp=2,fsdp=4",
                           "tp=4,dp=2",      "tp=2,dp=4,order=dp:2-tp-dp"};
  for (const char* a : layouts) {
    for (const char* b : layouts) {
      auto plan = Plan(L(a), L(b), spec, Topology{8, 4});
      ASSERT_TRUE(plan.ok()) << a << " -> " << b << ": " << plan.status();
      SCOPED_TRACE(std::string(a) + " -> " + b);
      ExpectOptimal(*plan);
    }
  }
}

// HybridFlow: training tp=t,pp=p,dp=d -> rollout tp=t_g with the
// interleaved grouping; each rank receives (t*p - t_g)/(t_g*t*p) * M.
TEST(PlannerTest, TrainToRolloutMeetsTheHybridFlowOptimum) {
  // Every tensor TP-split and the layers even over the stages, so a
  // training rank holds exactly M / (t*p).
  const int layers = 4;
  ModelSpec spec;
  for (int l = 0; l < layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    spec.tensors.push_back(MakeTensor(p + "q", DType::kF32, {16, 8}, 0,
                                      StageRule::Kind::kLayer, l));
    spec.tensors.push_back(MakeTensor(p + "o", DType::kF32, {8, 16}, 1,
                                      StageRule::Kind::kLayer, l));
  }
  const int64_t m = spec.TotalBytes();
  struct Case {
    int t, p, d, tg;
  } cases[] = {{4, 1, 2, 2}, {4, 2, 1, 1}, {2, 2, 2, 1}, {8, 1, 1, 2},
               {4, 2, 1, 2}, {2, 1, 4, 2}, {4, 1, 2, 4}};
  for (const Case& c : cases) {
    auto train = Layout::Make(c.t, c.p, c.d, 1);
    ASSERT_TRUE(train.ok());
    auto rollout = RolloutLayoutFor(*train, c.tg);
    ASSERT_TRUE(rollout.ok()) << rollout.status();
    const int world = c.t * c.p * c.d;
    SCOPED_TRACE(train->ToString() + " -> " + rollout->ToString());
    auto plan = Plan(*train, *rollout, spec, Topology{world, world});
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectOptimal(*plan);
    // Per-GPU bytes: (t*p - t_g) / (t_g * t * p) * M.
    const int64_t want = (int64_t{c.t} * c.p - c.tg) * m / (int64_t{c.tg} * c.t * c.p);
    std::vector<int64_t> got(world, 0);
    for (const Step& s : plan->steps) {
      for (const Transfer& t : s.transfers) {
        got[t.dst_rank] += t.length * 4;
      }
    }
    for (int r = 0; r < world; ++r) EXPECT_EQ(got[r], want) << "rank " << r;
  }
  // With the default (TP-adjacent) order the rollout shards do not contain
  // the training shards, and more must move.
  auto train = Layout::Make(4, 1, 2, 1);
  auto naive = Plan(*train, L("tp=2,dp=4"), spec, Topology{8, 8});
  auto best = Plan(*train, *RolloutLayoutFor(*train, 2), spec, Topology{8, 8});
  ASSERT_TRUE(naive.ok() && best.ok());
  EXPECT_GT(naive->stats.network_bytes(), best->stats.network_bytes());
}

TEST(PlannerTest, PrefersASenderOnTheSameNode) {
  ModelSpec spec = TinyLlama(2);
  // Two replicas of fsdp=2: {0,1} and {2,3}; nodes {0,1} and {2,3}.
  auto plan = Plan(L("fsdp=2,dp=2"), L("fsdp=4"), spec, Topology{4, 2});
  ASSERT_TRUE(plan.ok());
  EXPECT_GT(plan->stats.same_node_bytes, 0);
  EXPECT_EQ(plan->stats.cross_node_bytes, 0);
  ExpectOptimal(*plan);
}

TEST(PlannerTest, BalancesBytesOverReplicas) {
  ModelSpec spec = TinyLlama(4);
  // Every source rank holds everything; nodes of one rank: who sends?
  auto plan = Plan(L("dp=4"), L("dp=4"), spec, Topology{4, 1});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->stats.network_bytes(), 0);  // All local.
  // tp=4 -> dp=4: every rank needs 3/4 of each TP tensor from the others;
  // the three senders of each piece share it (one sender each).
  auto spread = Plan(L("tp=2,dp=2"), L("fsdp=4"), spec, Topology{4, 1});
  ASSERT_TRUE(spread.ok());
  std::map<int, int64_t> sent;
  for (const Step& s : spread->steps) {
    for (const Transfer& t : s.transfers) sent[t.src_rank] += t.length;
  }
  int64_t lo = INT64_MAX, hi = 0;
  for (auto& [r, n] : sent) {
    lo = std::min(lo, n);
    hi = std::max(hi, n);
  }
  EXPECT_EQ(sent.size(), 4u);
  EXPECT_LE(hi, 2 * lo);
}

TEST(PlannerTest, StepsRespectTheBucket) {
  ModelSpec spec = TinyLlama(4, 32, 64);
  const int64_t bucket = 1024;
  auto plan = Plan(L("fsdp=4"), L("tp=2,dp=2"), spec, Topology{4, 2},
                   PlanOptions{bucket});
  ASSERT_TRUE(plan.ok());
  ExpectOptimal(*plan);
  EXPECT_GT(plan->steps.size(), 4u);
  int64_t total = 0;
  for (const Step& s : plan->steps) {
    std::map<int, int64_t> send, recv;
    for (const Transfer& t : s.transfers) {
      send[t.src_rank] += t.length * 4;
      recv[t.dst_rank] += t.length * 4;
      total += t.length * 4;
    }
    for (auto& [r, n] : send) EXPECT_LE(n, bucket);
    for (auto& [r, n] : recv) EXPECT_LE(n, bucket);
  }
  EXPECT_EQ(total, plan->stats.network_bytes());
  EXPECT_LE(plan->stats.peak_staging_bytes, 3 * bucket);
  EXPECT_GT(plan->stats.peak_staging_bytes, 0);
  EXPECT_NE(plan->Summary().find("peak staging"), std::string::npos);
}

// The dp replicas of one tp shard need the same source elements: the
// planner cuts their lists in lockstep, so each sender's buckets to them are
// the same bytes (the executor packs one).
TEST(PlannerTest, ReplicasOfAShardGetTheSameBucketsInEachStep) {
  ModelSpec spec = TinyLlama(4, 32, 64);
  auto plan = Plan(L("fsdp=4"), L("tp=2,dp=2"), spec, Topology{4, 2},
                   PlanOptions{1024});
  ASSERT_TRUE(plan.ok());
  ExpectOptimal(*plan);
  auto replicas = [&](int a, int b) {
    for (int t = 0; t < plan->dst.num_tensors(); ++t) {
      const auto& x = plan->dst.Get(a, t).runs;
      const auto& y = plan->dst.Get(b, t).runs;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (x[i].offset != y[i].offset || x[i].length != y[i].length) {
          return false;
        }
      }
    }
    return true;
  };
  int twins = 0;
  for (const Step& s : plan->steps) {
    // [src][dst] -> (tensor, src_offset, length) in order.
    std::map<std::pair<int, int>, std::vector<std::array<int64_t, 3>>> lists;
    for (const Transfer& t : s.transfers) {
      lists[{t.src_rank, t.dst_rank}].push_back(
          {t.tensor, t.src_offset, t.length});
    }
    for (int src = 0; src < 4; ++src) {
      for (int a = 0; a < 4; ++a) {
        for (int b = a + 1; b < 4; ++b) {
          if (a == src || b == src || !replicas(a, b)) continue;
          ++twins;
          EXPECT_TRUE((lists[{src, a}] == lists[{src, b}]))
              << "sender " << src << ", replicas " << a << " and " << b;
        }
      }
    }
  }
  EXPECT_GT(twins, 0);
}

// A job that grows (2 ranks to 4) or shrinks (4 to 1): the plan spans the
// larger world; ranks outside the source send nothing, ranks outside the
// destination receive nothing, and every destination element arrives once.
TEST(PlannerTest, WorldSizeChanges) {
  ModelSpec spec = TinyLlama(2);
  for (const auto& [from, to] :
       std::vector<std::pair<std::string, std::string>>{{"fsdp=2", "tp=2,dp=2"},
                                                        {"tp=2,dp=2", "dp=1"},
                                                        {"dp=1", "fsdp=3"}}) {
    const Layout src = L(from), dst = L(to);
    const int world = std::max(src.world_size(), dst.world_size());
    auto plan = Plan(src, dst, spec, Topology{world, 2});
    ASSERT_TRUE(plan.ok()) << from << " -> " << to << ": " << plan.status();
    int64_t want = 0;
    auto dst_map = ShardMap::Build(dst, spec);
    ASSERT_TRUE(dst_map.ok());
    std::vector<int64_t> got(world, 0), need(world, 0);
    for (int r = 0; r < dst.world_size(); ++r) {
      for (int t = 0; t < static_cast<int>(spec.tensors.size()); ++t) {
        const int64_t bytes =
            dst_map->Get(r, t).num_elements *
            static_cast<int64_t>(DTypeSize(spec.tensors[t].meta.dtype));
        need[r] += bytes;
        want += bytes;
      }
    }
    EXPECT_EQ(plan->stats.dst_bytes, want) << from << " -> " << to;
    auto count = [&](const Transfer& t) {
      EXPECT_LT(t.src_rank, src.world_size()) << from << " -> " << to;
      EXPECT_LT(t.dst_rank, dst.world_size()) << from << " -> " << to;
      got[t.dst_rank] +=
          t.length *
          static_cast<int64_t>(DTypeSize(spec.tensors[t.tensor].meta.dtype));
    };
    for (const Transfer& t : plan->local) count(t);
    for (const Step& step : plan->steps) {
      for (const Transfer& t : step.transfers) count(t);
    }
    EXPECT_EQ(got, need) << from << " -> " << to;
  }
}

TEST(PlannerTest, BadInputIsAClearErrorBeforeAnythingMoves) {
  ModelSpec spec = TinyLlama(2);  // hidden 16, vocab 32
  auto mismatch = Plan(L("fsdp=4"), L("tp=2,dp=4"), spec, Topology{4, 4});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("world size mismatch"),
            std::string::npos);
  auto nofit = Plan(L("fsdp=3"), L("tp=3"), spec, Topology{3, 3});
  ASSERT_FALSE(nofit.ok());
  EXPECT_NE(nofit.status().message().find("not divisible by tp=3"),
            std::string::npos);
  EXPECT_FALSE(Plan(L("dp=2"), L("dp=2"), spec, Topology{2, 0}).ok());
  EXPECT_FALSE(RolloutLayoutFor(L("tp=4"), 3).ok());
  EXPECT_FALSE(RolloutLayoutFor(L("fsdp=4"), 2).ok());
}

TEST(PlannerTest, FingerprintDependsOnThePlan) {
  ModelSpec spec = TinyLlama(2);
  auto a = Plan(L("fsdp=4"), L("tp=2,dp=2"), spec, Topology{4, 4});
  auto b = Plan(L("fsdp=4"), L("tp=2,dp=2"), spec, Topology{4, 4});
  auto c = Plan(L("fsdp=4"), L("tp=4"), spec, Topology{4, 4});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->Fingerprint(), b->Fingerprint());
  EXPECT_NE(a->Fingerprint(), c->Fingerprint());
}

}  // namespace
}  // namespace hy::reshard
