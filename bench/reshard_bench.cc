// hy_bench_reshard: fsdp=4 -> tp=2,dp=2 resharding of a Llama-shaped f32
// model between 4 local processes over Gloo (C10dTransport), beside the
// memcpy of the same bytes (the limit) and a plain ProcessGroupGloo
// all-gather moving as many bytes per rank between the same processes (the
// peer baseline).
//
//   hy_bench_reshard [--json] [--size-mib N] [--reps N] [--bucket-mib N]
//                    [--hosts NS0=ADDR0,NS1=ADDR1] [--learn-link]
//                    [--link-gbps G]
//
// --bucket-mib is the planner's bucket (PlanOptions::bucket_bytes).
// --hosts puts ranks 2h and 2h + 1 in network namespace NSh, reached at
// ADDRh (scripts/bench-reshard-link.sh makes them, with links shaped by
// tc); the job itself must run in NS0 (it hosts the store there). The plan
// then knows 2 ranks per node, so half of each rank's peers are across the
// link. --learn-link: sparse delta learns the link's speed from its own
// exchanges (ExecutorOptions::learn_link_speed) and skips the scan where
// the link is faster; --link-gbps labels the JSON rows (link_gbps).
// The process (reshard_bench_job.cc) hosts a TCPStore and re-executes
// itself once per rank with --worker; rank 0 prints. Columns:
//   bytes/rank   the most payload bytes (wire dtype, before delta) any one
//                rank must send or receive: what the reshard must move
//   wire/rank    the most bytes any one rank handed to the transport
//   seconds      the slowest rank, best of --reps; each rep of a full row
//                runs the all-gather right before the reshard it is
//                compared with, each rep of a delta row changes a fresh
//                set of values first
//   GB/s         bytes/rank / seconds, 10^9 bytes per GB
//   vs ag        seconds / seconds of the all-gather moving bytes/rank per
//                rank (raw rows: the raw one; bf16 and delta rows: the bf16)
// Delta rows change the f32 source so that exactly that fraction of the
// bf16 values differ from the previous run (after one unmeasured delta
// round, so they show the executor's steady state). cpu s: the CPU seconds
// (user + system, all threads) of all 4 ranks together during the timed
// run: on 2 cores, near 2x the seconds means the cores are the limit. Every
// destination is checked bitwise against the values it must hold; a mismatch
// exits 1.

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "hy/reshard/c10d_transport.h"
#include "hy/reshard/executor.h"
#include "hy/reshard/plan.h"
#include "reshard_bench_job.h"
#include "reshard_bench_model.h"

namespace hy::bench {
namespace {

using namespace hy::reshard;  // NOLINT: a benchmark of this one module.
using Clock = std::chrono::steady_clock;

constexpr int kWorld = kReshardWorld;
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Row {
  std::string mode;
  int64_t bytes = 0;  // Per rank, the most any rank moves.
  int64_t wire = 0;
  double seconds = 0;
  double baseline = 0;  // The matching all-gather's seconds.
  std::string note;     // Executor phases of the slowest rank.
  double cpu = 0;       // CPU seconds (user + sys) of all ranks together.
};

class Worker {
 public:
  Worker(const ReshardFlags& flags, C10dTransport* t) : flags_(flags), t_(t) {}

  Status Run() {
    HY_ASSIGN_OR_RETURN(ModelSpec spec, LlamaSpec(flags_.size_mib));
    HY_ASSIGN_OR_RETURN(Layout src, Layout::Parse("fsdp=4"));
    HY_ASSIGN_OR_RETURN(Layout dst, Layout::Parse("tp=2,dp=2"));
    PlanOptions plan_options;
    plan_options.bucket_bytes = flags_.bucket_mib << 20;
    HY_ASSIGN_OR_RETURN(
        TransferPlan plan,
        Plan(src, dst, spec, Topology{kWorld, RanksPerNode(flags_)},
             plan_options));
    plan_ = std::make_shared<const TransferPlan>(std::move(plan));
    const int64_t raw = MovedBytes(WireFormat::kRaw);
    const int64_t bf16 = MovedBytes(WireFormat::kBf16);
    if (me() == 0 && !flags_.json) {
      std::printf(
          "model: %zu tensors, %.1f MB f32; fsdp=4 -> tp=2,dp=2, "
          "%zu steps, 4 processes over Gloo %s\n",
          spec.tensors.size(), spec.TotalBytes() / 1e6, plan_->steps.size(),
          flags_.host_ns.empty() ? "on 127.0.0.1"
                                 : "on 2 hosts (network namespaces) x 2");
    }
    src_ = MakeSourceShards(plan_->src, me());
    HY_ASSIGN_OR_RETURN(double memcpy_s, TimeMemcpy(raw));
    Row ag[2], full[2];
    HY_RETURN_IF_ERROR(RunFull(WireFormat::kRaw, raw, &ag[0], &full[0]));
    HY_RETURN_IF_ERROR(RunFull(WireFormat::kBf16, bf16, &ag[1], &full[1]));
    HY_ASSIGN_OR_RETURN(const int64_t full_wire, Sum(last_wire_));
    rows_ = {
        Row{"memcpy (limit)", raw, 0, memcpy_s, ag[0].seconds, "", last_cpu_},
        ag[0], ag[1], full[0], full[1]};
    HY_ASSIGN_OR_RETURN(const int64_t delta5_wire,
                        RunDelta(bf16, ag[1].seconds));
    if (me() == 0) Print(full_wire, delta5_wire);
    return t_->Barrier();
  }

 private:
  Result<double> TimeMemcpy(int64_t bytes) {
    std::vector<uint8_t> from(bytes, 1), to(bytes, 2);
    double best = kInf;
    for (int rep = 0; rep < flags_.reps; ++rep) {
      HY_ASSIGN_OR_RETURN(double s, Time([&] {
                            std::memcpy(to.data(), from.data(), bytes);
                            return Status::OK();
                          }));
      best = std::min(best, s);
    }
    return best;
  }

  // The all-gather that moves `bytes` per rank and the full reshard in
  // `wire`. Each rep runs the two back to back, so that the shared
  // machine's noise hits both alike; each keeps its best.
  Status RunFull(WireFormat wire, int64_t bytes, Row* ag, Row* full) {
    const int64_t each = (bytes + kWorld - 2) / (kWorld - 1);
    std::vector<uint8_t> in(each, static_cast<uint8_t>(me()));
    std::vector<uint8_t> all(each * kWorld);
    ShardBuffers out = MakeDestShards(plan_->spec, plan_->dst, me(), wire);
    Executor executor(plan_, t_, Options(wire, false));
    *ag = Row{std::string("gloo all-gather ") + WireFormatName(wire),
              bytes,
              bytes,
              kInf,
              0,
              ""};
    *full = Row{
        std::string("reshard ") + WireFormatName(wire), bytes, 0, kInf, 0, ""};
    for (int rep = 0; rep < flags_.reps; ++rep) {
      HY_ASSIGN_OR_RETURN(double ag_s, Time([&] {
                            return t_->AllGatherEqual(ConstBytes(in),
                                                      MutableBytes(all));
                          }));
      if (ag_s < ag->seconds) ag->cpu = last_cpu_;
      HY_ASSIGN_OR_RETURN(double reshard_s,
                          Time([&] { return RunOnce(&executor, &out); }));
      HY_RETURN_IF_ERROR(Summarize(&full->wire));
      ag->seconds = std::min(ag->seconds, ag_s);
      if (reshard_s < full->seconds) {
        full->seconds = reshard_s;
        full->note = last_note_;
        full->cpu = last_cpu_;
      }
    }
    ag->baseline = full->baseline = ag->seconds;
    return Verify(out, wire);
  }

  // Sparse delta in bf16 after changing 1%, 5% and 50% of the values.
  // Returns the wire bytes of all ranks at 5%.
  Result<int64_t> RunDelta(int64_t bytes, double baseline) {
    ShardBuffers out =
        MakeDestShards(plan_->spec, plan_->dst, me(), WireFormat::kBf16);
    Executor delta(plan_, t_, Options(WireFormat::kBf16, true));
    int64_t wire_bytes = 0, delta5_wire = 0;
    HY_RETURN_IF_ERROR(Reshard(&delta, &out, &wire_bytes));  // Sends all.
    // One unmeasured delta round first: the rows are the steady state of
    // an executor that reshards every iteration, like the full rows' best
    // of --reps, not its first-run allocations.
    rounds_.push_back({0xC0FFEE + rounds_.size(), 10000});
    ApplyRound(plan_->src, me(), rounds_.back(), &src_);
    HY_RETURN_IF_ERROR(Reshard(&delta, &out, &wire_bytes));
    for (double fraction : {0.01, 0.05, 0.50}) {
      char mode[64];
      std::snprintf(mode, sizeof(mode), "sparse delta %g%% changed",
                    fraction * 100);
      Row row{mode, bytes, 0, kInf, baseline, ""};
      // Each rep changes a fresh set of values, then reshards.
      for (int rep = 0; rep < flags_.reps; ++rep) {
        rounds_.push_back({0xC0FFEE + rounds_.size(),
                           static_cast<uint64_t>(fraction * 1000000)});
        ApplyRound(plan_->src, me(), rounds_.back(), &src_);
        HY_ASSIGN_OR_RETURN(double s,
                            Time([&] { return RunOnce(&delta, &out); }));
        HY_RETURN_IF_ERROR(Summarize(&wire_bytes));
        if (s < row.seconds) {
          row.seconds = s;
          row.wire = wire_bytes;
          row.note = last_note_;
          row.cpu = last_cpu_;
          if (fraction == 0.05) {
            HY_ASSIGN_OR_RETURN(delta5_wire, Sum(last_wire_));
          }
        }
      }
      rows_.push_back(row);
    }
    HY_RETURN_IF_ERROR(Verify(out, WireFormat::kBf16));
    return delta5_wire;
  }

  int me() const { return t_->rank(); }

  ExecutorOptions Options(WireFormat wire, bool delta) const {
    ExecutorOptions o;
    o.wire = wire;
    o.sparse_delta = delta;
    o.learn_link_speed = delta && flags_.learn_link;
    return o;
  }

  // The most bytes any rank sends or receives over the network.
  int64_t MovedBytes(WireFormat wire) const {
    std::vector<int64_t> sent(kWorld), received(kWorld);
    for (const Step& step : plan_->steps) {
      for (const Transfer& x : step.transfers) {
        const DType d = plan_->spec.tensors[x.tensor].meta.dtype;
        const int64_t n = x.length * DTypeSize(WireDType(d, wire));
        sent[x.src_rank] += n;
        received[x.dst_rank] += n;
      }
    }
    return std::max(*std::max_element(sent.begin(), sent.end()),
                    *std::max_element(received.begin(), received.end()));
  }

  Status Verify(const ShardBuffers& out, WireFormat wire) const {
    return VerifyShards(plan_->spec, plan_->dst, me(), wire, rounds_, out);
  }

  Status Reshard(Executor* executor, ShardBuffers* out, int64_t* wire_bytes) {
    HY_RETURN_IF_ERROR(RunOnce(executor, out));
    return Summarize(wire_bytes);
  }

  // One run of the executor, all that Time measures: its figures stay in
  // last_stats_ for Summarize (collectives of the bench's own, untimed).
  Status RunOnce(Executor* executor, ShardBuffers* out) {
    std::vector<ConstBytes> in;
    for (const auto& v : src_) in.emplace_back(v.data(), v.size());
    std::vector<MutableBytes> to;
    for (auto& v : *out) to.emplace_back(v.data(), v.size());
    return executor->Run(in, to, &last_stats_);
  }

  // The last run's bytes (*wire_bytes: the most of any rank) and the
  // phases of its slowest rank (last_note_).
  Status Summarize(int64_t* wire_bytes) {
    const ReshardStats& stats = last_stats_;
    last_wire_ = std::max(stats.wire_bytes_sent, stats.wire_bytes_received);
    HY_ASSIGN_OR_RETURN(*wire_bytes, Max(last_wire_));
    HY_ASSIGN_OR_RETURN(std::vector<ReshardStats> all, Gather(stats));
    ReshardStats slowest = all[0];
    for (const ReshardStats& s : all) {
      if (s.total_seconds > slowest.total_seconds) slowest = s;
    }
    char note[192];
    int at = std::snprintf(
        note, sizeof(note), "pack %.3f xfer %.3f unpack %.3f",
        slowest.pack_seconds, slowest.transfer_seconds, slowest.unpack_seconds);
    if (slowest.buckets_full_by_cost > 0 ||
        slowest.scan_bytes_per_second > 0) {  // A delta row.
      std::snprintf(note + at, sizeof(note) - at,
                    "; link %.2f GB/s, scan %.2f GB/s, %lld whole by cost",
                    slowest.link_bytes_per_second / 1e9,
                    slowest.scan_bytes_per_second / 1e9,
                    static_cast<long long>(slowest.buckets_full_by_cost));
    }
    last_note_ = note;
    return Status::OK();
  }

  // Runs fn on every rank from a barrier; the slowest rank's seconds.
  // Also sets last_cpu_: the CPU seconds all ranks spent in it together.
  Result<double> Time(const std::function<Status()>& fn) {
    HY_RETURN_IF_ERROR(t_->Barrier());
    const double cpu0 = CpuSeconds();
    const auto start = Clock::now();
    HY_RETURN_IF_ERROR(fn());
    const double mine =
        std::chrono::duration<double>(Clock::now() - start).count();
    const double cpu = CpuSeconds() - cpu0;
    HY_ASSIGN_OR_RETURN(std::vector<double> all, Gather(mine));
    HY_ASSIGN_OR_RETURN(std::vector<double> cpus, Gather(cpu));
    last_cpu_ = 0;
    for (double c : cpus) last_cpu_ += c;
    return *std::max_element(all.begin(), all.end());
  }

  // User + system CPU seconds of this process (all its threads).
  static double CpuSeconds() {
    rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec +
           (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  }

  template <typename T>
  Result<std::vector<T>> Gather(T value) {
    std::vector<std::vector<uint8_t>> all;
    HY_RETURN_IF_ERROR(t_->AllGatherV(ConstBytes(&value, sizeof(T)), &all));
    std::vector<T> out(all.size());
    for (size_t r = 0; r < all.size(); ++r) {
      std::memcpy(&out[r], all[r].data(), sizeof(T));
    }
    return out;
  }
  Result<int64_t> Max(int64_t v) {
    HY_ASSIGN_OR_RETURN(std::vector<int64_t> all, Gather(v));
    return *std::max_element(all.begin(), all.end());
  }
  Result<int64_t> Sum(int64_t v) {
    HY_ASSIGN_OR_RETURN(std::vector<int64_t> all, Gather(v));
    int64_t sum = 0;
    for (int64_t x : all) sum += x;
    return sum;
  }

  void Print(int64_t full_wire, int64_t delta5_wire) const {
    if (!flags_.json) {
      std::printf("| %-26s | %10s | %10s | %8s | %7s | %6s | %9s | %s\n",
                  "mode", "MB/rank", "wire MB", "seconds", "GB/s", "vs ag",
                  "cpu s", "seconds of the slowest rank");
      std::printf("|%s|%s|%s|%s|%s|%s|%s|%s\n", std::string(28, '-').c_str(),
                  std::string(12, '-').c_str(), std::string(12, '-').c_str(),
                  std::string(10, '-').c_str(), std::string(9, '-').c_str(),
                  std::string(8, '-').c_str(), std::string(11, '-').c_str(),
                  std::string(32, '-').c_str());
    }
    for (const Row& r : rows_) {
      const double gbps = r.bytes / r.seconds / 1e9;
      if (flags_.json) {
        std::printf(
            "{\"bench\":\"reshard\",\"mode\":\"%s\",\"link_gbps\":%g,"
            "\"bytes_per_rank\":%lld,\"wire_bytes_per_rank\":%lld,"
            "\"wire_mb\":%.3f,\"seconds\":%.4f,\"gbps\":%.3f,"
            "\"vs_allgather\":%.3f,\"cpu_seconds\":%.4f,\"note\":\"%s\"}\n",
            r.mode.c_str(), flags_.link_gbps, static_cast<long long>(r.bytes),
            static_cast<long long>(r.wire), r.wire / 1e6, r.seconds, gbps,
            r.seconds / r.baseline, r.cpu, r.note.c_str());
      } else {
        std::printf(
            "| %-26s | %10.1f | %10.1f | %8.4f | %7.3f | %6.2f | %9.3f | %s\n",
            r.mode.c_str(), r.bytes / 1e6, r.wire / 1e6, r.seconds, gbps,
            r.seconds / r.baseline, r.cpu, r.note.c_str());
      }
    }
    struct Target {
      const char* name;
      double value, limit;
      bool ok;
    };
    const double raw = rows_[3].seconds / rows_[3].baseline;
    const double bf16 = rows_[4].seconds / rows_[4].baseline;
    const double fewer =
        static_cast<double>(full_wire) / std::max<int64_t>(delta5_wire, 1);
    // rows_[5..7]: delta at 1%, 5%, 50%, against the full bf16 reshard.
    const double d5 = rows_[6].seconds / rows_[4].seconds;
    const double d50 = rows_[7].seconds / rows_[4].seconds;
    const Target targets[] = {
        {"reshard raw / all-gather <= 1.1", raw, 1.1, raw <= 1.1},
        {"reshard bf16 / all-gather <= 1.1", bf16, 1.1, bf16 <= 1.1},
        {"delta 5% / full bf16 time <= 0.5", d5, 0.5, d5 <= 0.5},
        {"delta 50% / full bf16 time <= 1.0", d50, 1.0, d50 <= 1.0},
        {"full bf16 / delta 5% wire >= 10", fewer, 10, fewer >= 10}};
    for (const Target& t : targets) {
      if (flags_.json) {
        std::printf(
            "{\"bench\":\"reshard\",\"target\":\"%s\",\"value\":%.3f,"
            "\"limit\":%g,\"ok\":%s}\n",
            t.name, t.value, t.limit, t.ok ? "true" : "false");
      } else {
        std::printf("target %-34s %8.2f  %s\n", t.name, t.value,
                    t.ok ? "ok" : "MISSED");
      }
    }
    std::fflush(stdout);
  }

  const ReshardFlags flags_;
  C10dTransport* const t_;
  std::shared_ptr<const TransferPlan> plan_;
  ShardBuffers src_;
  std::vector<ChangeRound> rounds_;  // Applied to src_ so far.
  std::vector<Row> rows_;
  ReshardStats last_stats_;  // This rank's, of the last run.
  int64_t last_wire_ = 0;    // This rank's, of the last Reshard.
  std::string last_note_;    // Phases of the last Reshard's slowest rank.
  double last_cpu_ = 0;      // All ranks' CPU seconds in the last Time.
};

int RunWorker(const ReshardFlags& flags) {
  C10dTransportOptions options;
  options.prefix = "hy_bench_reshard";
  options.timeout_ms = 120000;
  options.rank0_hosts_store = false;
  const bool hosts = !flags.host_addr.empty();
  // Gloo binds to this rank's host address; the store is on host 0.
  options.gloo_hostname =
      hosts ? flags.host_addr[flags.rank / RanksPerNode(flags)] : "127.0.0.1";
  auto t = C10dTransport::Connect(flags.rank, kWorld,
                                  hosts ? flags.host_addr[0] : "127.0.0.1",
                                  flags.port, options);
  Status s = t.ok() ? Worker(flags, t->get()).Run() : t.status();
  if (s.ok()) return 0;
  std::fprintf(stderr, "hy_bench_reshard rank %d: %s\n", flags.rank,
               s.ToString().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  ReshardFlags f;
  const int rc = ParseReshardFlags(argc, argv, &f);
  if (rc >= 0) return rc;
  return f.worker ? RunWorker(f) : RunReshardJob(f);
}

}  // namespace
}  // namespace hy::bench

int main(int argc, char** argv) { return hy::bench::Main(argc, argv); }
