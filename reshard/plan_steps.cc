#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <string>

#include "hy/common/dtype.h"
#include "hy/common/hash.h"
#include "plan_internal.h"

namespace hy::reshard {
namespace internal {

void CutSteps(std::vector<Transfer> network, TransferPlan* plan) {
  const int world = plan->topology.world_size;
  const int64_t bucket = plan->bucket_bytes;
  auto es_of = [&](const Transfer& t) {
    return static_cast<int64_t>(DTypeSize(plan->spec.tensors[t.tensor].meta.dtype));
  };
  // One queue per (src, dst) pair, in planning order.
  std::map<std::pair<int, int>, std::deque<Transfer>> queues;
  std::vector<int64_t> total_send(world, 0), total_recv(world, 0);
  for (const Transfer& t : network) {
    queues[{t.src_rank, t.dst_rank}].push_back(t);
    int64_t bytes = t.length * es_of(t);
    total_send[t.src_rank] += bytes;
    total_recv[t.dst_rank] += bytes;
  }
  // Twins: destinations that get the same source elements in the same
  // order from one sender (replicas of one destination shard, e.g. the dp
  // copies of a tp shard). They are cut in lockstep, so their buckets in a
  // step are byte-identical and the executor packs one for all of them.
  struct Group {
    int src;
    std::vector<int> dsts;
  };
  auto same_source = [](const std::deque<Transfer>& a,
                        const std::deque<Transfer>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), SameSourceRun);
  };
  std::vector<Group> groups;
  for (const auto& [key, q] : queues) {
    Group* twin = nullptr;
    for (Group& g : groups) {
      if (g.src == key.first &&
          same_source(queues.at({g.src, g.dsts[0]}), q)) {
        twin = &g;
        break;
      }
    }
    if (twin != nullptr) {
      twin->dsts.push_back(key.second);
    } else {
      groups.push_back({key.first, {key.second}});
    }
  }
  plan->stats.num_transfers = 0;
  size_t rotate = 0;
  std::vector<std::vector<int64_t>> step_send, step_recv;  // [step][rank]
  while (!groups.empty()) {
    Step step;
    std::vector<int64_t> send(world, 0), recv(world, 0);
    // Visit groups starting at a rotating position so none starves.
    const size_t first = rotate++ % groups.size();
    for (size_t k = 0; k < groups.size(); ++k) {
      const Group& g = groups[(first + k) % groups.size()];
      const int s = g.src;
      const int64_t copies = static_cast<int64_t>(g.dsts.size());
      std::deque<Transfer>& lead = queues[{s, g.dsts[0]}];
      while (!lead.empty()) {
        const int64_t es = es_of(lead.front());
        int64_t room = (bucket - send[s]) / (es * copies);
        bool used = send[s] != 0;
        for (int d : g.dsts) {
          room = std::min(room, (bucket - recv[d]) / es);
          used = used || recv[d] != 0;
        }
        if (room <= 0) {
          if (used) break;  // Budget used up.
          room = 1;  // An element larger than the bucket goes alone.
        }
        const int64_t take = std::min(lead.front().length, room);
        const bool whole = take == lead.front().length;
        for (int d : g.dsts) {
          std::deque<Transfer>& q = queues[{s, d}];
          Transfer& t = q.front();
          Transfer part = t;
          part.length = take;
          step.transfers.push_back(part);
          send[s] += take * es;
          recv[d] += take * es;
          t.length -= take;
          t.src_offset += take;
          t.dst_offset += take;
          if (whole) q.pop_front();
        }
        if (!whole) break;  // Only part fitted: the budget is full.
      }
    }
    groups.erase(std::remove_if(groups.begin(), groups.end(),
                                [&](const Group& g) {
                                  return queues[{g.src, g.dsts[0]}].empty();
                                }),
                 groups.end());
    std::stable_sort(step.transfers.begin(), step.transfers.end(),
                     [](const Transfer& a, const Transfer& b) {
                       return a.src_rank < b.src_rank ||
                              (a.src_rank == b.src_rank &&
                               a.dst_rank < b.dst_rank);
                     });
    plan->stats.num_transfers += static_cast<int64_t>(step.transfers.size());
    plan->steps.push_back(std::move(step));
    step_send.push_back(std::move(send));
    step_recv.push_back(std::move(recv));
  }
  // Peak staging: a step's send and receive buffers, plus the next step's
  // send buffer, packed while this one is in flight.
  for (size_t k = 0; k < step_send.size(); ++k) {
    for (int r = 0; r < world; ++r) {
      int64_t next = k + 1 < step_send.size() ? step_send[k + 1][r] : 0;
      plan->stats.peak_staging_bytes =
          std::max(plan->stats.peak_staging_bytes,
                   step_send[k][r] + step_recv[k][r] + next);
    }
  }
  plan->stats.max_send_bytes =
      world ? *std::max_element(total_send.begin(), total_send.end()) : 0;
  plan->stats.max_recv_bytes =
      world ? *std::max_element(total_recv.begin(), total_recv.end()) : 0;
}

}  // namespace internal

uint64_t TransferPlan::Fingerprint() const {
  Hasher128 h;
  auto add_str = [&](const std::string& s) {
    uint64_t n = s.size();
    h.Update(ConstBytes(&n, sizeof(n)));
    h.Update(ConstBytes(s.data(), s.size()));
  };
  auto add_i64 = [&](int64_t v) { h.Update(ConstBytes(&v, sizeof(v))); };
  add_str(src.layout().ToString());
  add_str(dst.layout().ToString());
  add_i64(topology.world_size);
  add_i64(topology.ranks_per_node);
  add_i64(bucket_bytes);
  for (const TensorSpec& t : spec.tensors) {
    add_str(t.meta.name);
    add_i64(static_cast<int64_t>(t.meta.dtype));
    for (int64_t d : t.meta.shape) add_i64(d);
    add_i64(t.tp_dim);
  }
  add_i64(static_cast<int64_t>(local.size()));
  for (const Step& s : steps) {
    add_i64(static_cast<int64_t>(s.transfers.size()));
    for (const Transfer& t : s.transfers) {  // Field by field: no padding.
      int64_t f[6] = {t.tensor,     t.src_rank,   t.dst_rank,
                      t.src_offset, t.dst_offset, t.length};
      h.Update(ConstBytes(f, sizeof(f)));
    }
  }
  return h.Digest().low;
}

std::string TransferPlan::Summary() const {
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  char buf[768];
  std::snprintf(
      buf, sizeof(buf),
      "plan %s -> %s, %d ranks (%d per node), %zu tensors\n"
      "  destination shards  %10.2f MiB\n"
      "  local copy          %10.2f MiB\n"
      "  same node           %10.2f MiB\n"
      "  cross node          %10.2f MiB\n"
      "  max send / recv     %10.2f / %.2f MiB per rank\n"
      "  steps               %10zu (bucket %.0f MiB), %lld network runs\n"
      "  peak staging        %10.2f MiB per rank\n"
      "  planned in          %10.3f ms\n",
      src.layout().ToString().c_str(), dst.layout().ToString().c_str(),
      topology.world_size, topology.ranks_per_node, spec.tensors.size(),
      mib(stats.dst_bytes), mib(stats.local_bytes), mib(stats.same_node_bytes),
      mib(stats.cross_node_bytes), mib(stats.max_send_bytes),
      mib(stats.max_recv_bytes), steps.size(), mib(bucket_bytes),
      static_cast<long long>(stats.num_transfers), mib(stats.peak_staging_bytes),
      stats.plan_seconds * 1e3);
  return buf;
}

TransferPlan LocalCopiesAsSteps(const TransferPlan& plan, int num_steps) {
  TransferPlan out = plan;
  out.steps.assign(static_cast<size_t>(num_steps), Step());
  std::vector<int64_t> step_bytes(static_cast<size_t>(num_steps), 0);
  for (size_t i = 0; i < plan.local.size(); ++i) {
    const Transfer& t = plan.local[i];
    out.steps[i % num_steps].transfers.push_back(t);
    step_bytes[i % num_steps] +=
        t.length *
        static_cast<int64_t>(DTypeSize(plan.spec.tensors[t.tensor].meta.dtype));
  }
  out.local.clear();
  PlanStats& st = out.stats;
  st.same_node_bytes = st.local_bytes;
  st.local_bytes = 0;
  st.max_send_bytes = st.max_recv_bytes = 0;
  st.num_transfers = static_cast<int64_t>(plan.local.size());
  st.peak_staging_bytes = 0;
  for (int i = 0; i < num_steps; ++i) {
    const int64_t next = i + 1 < num_steps ? step_bytes[i + 1] : 0;
    st.peak_staging_bytes =
        std::max(st.peak_staging_bytes, 2 * step_bytes[i] + next);
    st.max_send_bytes = st.max_recv_bytes += step_bytes[i];
  }
  return out;
}

TransferPlan PlanFromRanks(const TransferPlan& plan,
                           const std::vector<bool>& from) {
  TransferPlan out = plan;
  auto taken = [&](const Transfer& t) {
    return t.src_rank >= 0 && static_cast<size_t>(t.src_rank) < from.size() &&
           from[static_cast<size_t>(t.src_rank)];
  };
  auto bytes = [&](const Transfer& t) {
    return t.length * static_cast<int64_t>(
                          DTypeSize(plan.spec.tensors[t.tensor].meta.dtype));
  };
  PlanStats& st = out.stats;
  st.local_bytes = st.same_node_bytes = st.cross_node_bytes = 0;
  st.num_transfers = 0;
  out.local.clear();
  for (const Transfer& t : plan.local) {
    if (!taken(t)) continue;
    out.local.push_back(t);
    st.local_bytes += bytes(t);
  }
  const int world = plan.topology.world_size;
  const int per_node = std::max(1, plan.topology.ranks_per_node);
  std::vector<int64_t> sent(static_cast<size_t>(world), 0);
  std::vector<int64_t> received(static_cast<size_t>(world), 0);
  out.steps.clear();
  for (const Step& step : plan.steps) {
    Step kept;
    for (const Transfer& t : step.transfers) {
      if (!taken(t)) continue;
      kept.transfers.push_back(t);
      const int64_t b = bytes(t);
      (t.src_rank / per_node == t.dst_rank / per_node ? st.same_node_bytes
                                                      : st.cross_node_bytes) +=
          b;
      if (t.src_rank < world) sent[static_cast<size_t>(t.src_rank)] += b;
      if (t.dst_rank >= 0 && t.dst_rank < world) {
        received[static_cast<size_t>(t.dst_rank)] += b;
      }
    }
    st.num_transfers += static_cast<int64_t>(kept.transfers.size());
    if (!kept.transfers.empty()) out.steps.push_back(std::move(kept));
  }
  st.max_send_bytes = st.max_recv_bytes = 0;
  for (int r = 0; r < world; ++r) {
    st.max_send_bytes = std::max(st.max_send_bytes, sent[r]);
    st.max_recv_bytes = std::max(st.max_recv_bytes, received[r]);
  }
  return out;
}

}  // namespace hy::reshard
