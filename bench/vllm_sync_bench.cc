// hy's weight sync into a running vLLM engine, as rollout.engine vllm does
// it, at a model's size: `--ranks` processes each hold their FSDP piece
// (f32) of the model in --model-dir's config.json, write it into the
// shared weight file (reshard::RunToSharedDestination, planned fsdp=N ->
// whole tensors), then the engine loads the file (EngineClient::
// UpdateWeights: start, update, finish with a version, prefix-cache reset).
// Per repetition: the time from "the optimizer step is done" to "the
// engine serves the new weights", its two parts, the ranks' and the
// engine's peak resident memory above what they held before (the engine:
// every process of --engine-pgid), and beside it a memcpy of the file's
// bytes (the limit). bench/vllm_sync_bench.py runs this beside verl's way
// and an engine restart. The engine's key: HY_VLLM_API_KEY.
//
// --remote-ranks K: the last K ranks stand for ranks on another host, as
// under torchrun across hosts: they never touch the file and send their
// pieces to rank 0 over c10d (Gloo on loopback here, hy's Executor on
// reshard::PlanFromRanks), rank 0 unpacking them into the file.
// --delta on|auto: they send only what changed since the last sync
// (rollout.vllm.delta: reshard's sparse delta; auto learns the link), and
// before every repetition after the first each rank changes --changed of
// its values (random elements, each by 1%, which moves its bf16 value).
// --remote-netns NAME: the remote ranks join network namespace NAME
// (/var/run/netns/NAME) and connect from --remote-addr to --master-addr,
// rank 0's address where the bench runs: a shaped link between two
// namespaces stands for the network between hosts
// (scripts/bench-vllm-link.sh).

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "bench_flags.h"
#include "hy/common/process_memory.h"
#include "hy/reshard/c10d_transport.h"
#include "hy/reshard/executor.h"
#include "hy/reshard/model_spec.h"
#include "hy/reshard/plan.h"
#include "hy/reshard/shard_map.h"
#include "hy/reshard/shared_destination.h"
#include "hy/trainer/config/model_config.h"
#include "hy/trainer/hf/hf_model.h"
#include "hy/trainer/vllm/engine_client.h"
#include "hy/trainer/vllm/weight_file.h"

namespace hy {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct RankReport {
  double seconds = 0;
  double extra_mb = 0;  // VmHWM during the write minus VmRSS before.
  int64_t wire_bytes = 0;  // Sent over c10d (remote ranks).
};

// Sum over the processes of group `pgid` of a /proc/<pid>/status field, kB.
int64_t GroupKb(pid_t pgid, const char* field, bool reset) {
  int64_t total = 0;
  DIR* d = opendir("/proc");
  if (d == nullptr) return 0;
  for (dirent* e; (e = readdir(d)) != nullptr;) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0 || getpgid(pid) != pgid) continue;
    const std::string base = "/proc/" + std::to_string(pid);
    if (reset) std::ofstream(base + "/clear_refs") << "5";
    std::ifstream in(base + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(field, 0) == 0) {
        total += std::atoll(line.c_str() + std::strlen(field));
      }
    }
  }
  closedir(d);
  return total;
}

int Run(int argc, char** argv) {
  CLI::App app("hy's weight sync into a running vLLM engine");
  std::string model_dir, url, dtype_name = "bfloat16";
  int ranks = 2, reps = 3, remote_ranks = 0;
  int engine_pgid = 0;
  bool json = false;
  std::string delta = "off", remote_netns, master_addr = "127.0.0.1",
              remote_addr = "127.0.0.1";
  double changed = 0.01;
  app.add_option("--model-dir", model_dir, "Directory with config.json")
      ->required();
  app.add_option("--url", url, "The engine (http://host:port)")->required();
  app.add_option("--engine-pgid", engine_pgid,
                 "The engine's process group (its memory is measured)");
  app.add_option("--ranks", ranks, "Trainer ranks (FSDP pieces)")
      ->check(bench::AtLeast(1));
  app.add_option("--reps", reps, "Repetitions")->check(bench::AtLeast(1));
  app.add_option("--remote-ranks", remote_ranks,
                 "The last K ranks send over c10d (Gloo) instead of "
                 "writing the file")
      ->check(bench::AtLeast(0));
  app.add_option("--dtype", dtype_name, "The engine's: bfloat16 | float32");
  app.add_option("--delta", delta,
                 "What remote ranks send: off | on | auto (rollout.vllm.delta)")
      ->check(CLI::IsMember({"off", "on", "auto"}));
  app.add_option("--changed", changed,
                 "Fraction of values each rank changes before every "
                 "repetition after the first (with --delta on|auto)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--remote-netns", remote_netns,
                 "Network namespace the remote ranks join");
  app.add_option("--master-addr", master_addr,
                 "Rank 0's address for the remote ranks");
  app.add_option("--remote-addr", remote_addr,
                 "The remote ranks' own address (Gloo binds it)");
  bench::AddJsonFlag(&app, &json);
  if (int code = bench::ParseFlags(&app, argc, argv); code >= 0) return code;

  auto fail = [](const Status& s) {
    std::cerr << "hy_bench_vllm_sync: " << s.ToString() << "\n";
    return 1;
  };
  if (remote_ranks >= ranks) {
    return fail(Status::InvalidArgument(
        "--remote-ranks must leave rank 0 on the engine's host"));
  }
  Result<trainer::ModelConfig> mc = trainer::ReadHfConfig(model_dir);
  if (!mc.ok()) return fail(mc.status());
  const auto metas = trainer::ModelTensors(*mc, trainer::ModelRole::kActor);
  auto spec = reshard::ModelSpec::Build(metas, reshard::ModelRules::Default());
  if (!spec.ok()) return fail(spec.status());
  auto dtype = trainer::EngineDType(dtype_name);
  if (!dtype.ok()) return fail(dtype.status());
  auto layout = trainer::LayoutWeightFile(metas, mc->tie_word_embeddings,
                                          *dtype);
  if (!layout.ok()) return fail(layout.status());
  auto train = reshard::Layout::Make(1, 1, 1, ranks).value();
  auto whole = reshard::Layout::Make(1, 1, 1, 1).value();
  reshard::Topology topo;
  topo.world_size = ranks;
  topo.ranks_per_node = ranks;
  auto plan = reshard::Plan(train, whole, *spec, topo);
  if (!plan.ok()) return fail(plan.status());
  std::vector<bool> remote(static_cast<size_t>(ranks), false);
  for (int r = ranks - remote_ranks; r < ranks; ++r) remote[r] = true;
  auto remote_plan = std::make_shared<const reshard::TransferPlan>(
      reshard::PlanFromRanks(*plan, remote));
  int port = 0;
  if (remote_ranks > 0) {  // A free port for rank 0's c10d store.
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = inet_addr(master_addr.c_str());
    socklen_t len = sizeof(addr);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return fail(Status::IOError("no free port"));
    }
    port = ntohs(addr.sin_port);
    close(fd);
  }
  auto map = reshard::ShardMap::Build(train, *spec);
  if (!map.ok()) return fail(map.status());
  const std::string path =
      "/dev/shm/hy-bench-weights-" + std::to_string(getpid());
  auto file = trainer::SharedWeightFile::Create(path, layout->size);
  if (!file.ok()) return fail(file.status());
  std::vector<MutableBytes> dst;
  for (const auto& e : layout->tensors) {
    dst.push_back((*file)->bytes(e.offset, e.bytes));
  }

  // The ranks: each holds its pieces and writes them on "go".
  std::vector<pid_t> pids;
  std::vector<int> to(ranks), from(ranks);
  for (int r = 0; r < ranks; ++r) {
    int a[2], b[2];
    if (pipe(a) != 0 || pipe(b) != 0) return fail(Status::IOError("pipe"));
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // Never outlive a bench that quit.
      close(a[1]);
      close(b[0]);
      std::vector<std::vector<float>> pieces;
      std::vector<ConstBytes> src;
      std::mt19937 rng(static_cast<unsigned>(r + 1));
      std::normal_distribution<float> normal(0, 0.02f);
      for (int t = 0; t < map->num_tensors(); ++t) {
        pieces.emplace_back(
            static_cast<size_t>(map->Get(r, t).num_elements));
        for (float& f : pieces.back()) f = normal(rng);
      }
      for (const auto& p : pieces) {
        src.emplace_back(reinterpret_cast<const uint8_t*>(p.data()),
                         p.size() * 4);
      }
      std::unique_ptr<reshard::C10dTransport> transport;
      std::unique_ptr<reshard::Executor> executor;
      if (remote[r] && !remote_netns.empty()) {
        const int ns = open(("/var/run/netns/" + remote_netns).c_str(),
                            O_RDONLY | O_CLOEXEC);
        if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) {
          std::cerr << "rank " << r << ": cannot join network namespace "
                    << remote_netns << ": " << std::strerror(errno) << "\n";
          _exit(1);
        }
        close(ns);
      }
      if (remote_ranks > 0) {
        reshard::C10dTransportOptions co;
        co.gloo_hostname = remote[r] ? remote_addr : master_addr;
        auto t = reshard::C10dTransport::Connect(r, ranks, master_addr, port,
                                                 co);
        if (!t.ok()) {
          std::cerr << "rank " << r << ": " << t.status().ToString() << "\n";
          _exit(1);
        }
        transport = std::move(t).value();
        reshard::ExecutorOptions eo;
        eo.wire = *dtype == DType::kBF16 ? reshard::WireFormat::kBf16
                                         : reshard::WireFormat::kRaw;
        eo.sparse_delta = delta != "off";
        eo.learn_link_speed = delta == "auto";
        executor = std::make_unique<reshard::Executor>(remote_plan,
                                                       transport.get(), eo);
      }
      std::vector<MutableBytes> into(dst.size());
      if (r == 0) into = dst;
      std::mt19937_64 pick(static_cast<unsigned>(100 + r));
      char cmd;
      while (read(a[0], &cmd, 1) == 1) {
        if (cmd == 'c') {  // What an optimizer step changed (not timed).
          for (auto& p : pieces) {
            const auto n = static_cast<uint64_t>(changed * p.size());
            for (uint64_t k = 0; k < n && !p.empty(); ++k) {
              p[pick() % p.size()] *= 1.01f;
            }
          }
          if (write(b[1], &cmd, 1) != 1) _exit(1);
          continue;
        }
        if (cmd != 'g') break;
        ResetPeakResident();
        const int64_t before = ResidentBytes();
        const auto t0 = Clock::now();
        Status s;
        if (!remote[r]) {
          s = reshard::RunToSharedDestination(*plan, r, 0, src, dst, *dtype);
        }
        reshard::ReshardStats rs;
        if (s.ok() && executor != nullptr) {
          s = executor->Run(src, into, &rs);
        }
        if (!s.ok()) std::cerr << "rank " << r << ": " << s.ToString() << "\n";
        RankReport rep{Since(t0), (PeakResidentBytes() - before) / 1048576.0,
                       rs.wire_bytes_sent};
        if (!s.ok()) rep.seconds = -1;
        if (write(b[1], &rep, sizeof(rep)) != sizeof(rep)) _exit(1);
      }
      _exit(0);
    }
    close(a[0]);
    close(b[1]);
    to[r] = a[1];
    from[r] = b[0];
    pids.push_back(pid);
  }
  // Ready: every rank holds its pieces (the first "go" waits for that).
  const char* key = std::getenv("HY_VLLM_API_KEY");
  trainer::EngineClient engine(url, key != nullptr ? key : "", 600);
  Status init = engine.InitWeightTransfer(path);
  if (!init.ok()) return fail(init);
  const std::string manifest = layout->ManifestJson();

  struct Rep {
    double total = 0, write = 0, load = 0, memcpy_s = 0;
    double rank_extra_mb = 0, engine_extra_mb = 0, wire_mb = 0;
  };
  std::vector<Rep> out;
  std::vector<uint8_t> a(layout->size, 1), b(layout->size, 2);
  for (int i = -1; i < reps; ++i) {  // i = -1: warm-up (first touch).
    Rep rep;
    if (delta != "off" && i >= 0) {  // Change values before the clock.
      for (int r = 0; r < ranks; ++r) {
        if (write(to[r], "c", 1) != 1) return fail(Status::IOError("rank"));
      }
      for (int r = 0; r < ranks; ++r) {
        char ack;
        if (read(from[r], &ack, 1) != 1) {
          return fail(Status::Internal("rank " + std::to_string(r) +
                                       " failed"));
        }
      }
    }
    int64_t engine_before = 0;
    if (engine_pgid > 0) engine_before = GroupKb(engine_pgid, "VmRSS:", true);
    const auto t0 = Clock::now();
    for (int r = 0; r < ranks; ++r) {
      if (write(to[r], "g", 1) != 1) return fail(Status::IOError("rank"));
    }
    for (int r = 0; r < ranks; ++r) {
      RankReport rr;
      if (read(from[r], &rr, sizeof(rr)) != sizeof(rr) || rr.seconds < 0) {
        return fail(Status::Internal("rank " + std::to_string(r) + " failed"));
      }
      rep.rank_extra_mb = std::max(rep.rank_extra_mb, rr.extra_mb);
      rep.wire_mb += static_cast<double>(rr.wire_bytes) / 1048576.0;
    }
    rep.write = Since(t0);
    const auto t1 = Clock::now();
    Status s = engine.UpdateWeights(manifest, layout->size,
                                    "bench-" + std::to_string(i + 1));
    if (!s.ok()) return fail(s);
    rep.load = Since(t1);
    rep.total = Since(t0);
    if (engine_pgid > 0) {
      rep.engine_extra_mb =
          (GroupKb(engine_pgid, "VmHWM:", false) - engine_before) / 1024.0;
    }
    const auto t2 = Clock::now();
    std::memcpy(b.data(), a.data(), a.size());
    rep.memcpy_s = Since(t2);
    if (i >= 0) out.push_back(rep);
  }
  for (int r = 0; r < ranks; ++r) close(to[r]);
  for (pid_t p : pids) waitpid(p, nullptr, 0);

  auto median = [&](double Rep::*f) {
    std::vector<double> v;
    for (const Rep& r : out) v.push_back(r.*f);
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double mb = static_cast<double>(layout->size) / 1048576.0;
  if (json) {
    std::printf(
        "{\"bench\":\"vllm_sync\",\"ranks\":%d,\"remote_ranks\":%d,"
        "\"reps\":%d,\"dtype\":\"%s\",\"delta\":\"%s\",\"changed\":%g,"
        "\"wire_mb\":%.3f,"
        "\"model_mb\":%.1f,\"tensors\":%zu,\"sync_s\":%.4f,\"write_s\":%.4f,"
        "\"load_s\":%.4f,\"memcpy_s\":%.4f,\"rank_extra_rss_mb\":%.1f,"
        "\"engine_extra_rss_mb\":%.1f}\n",
        ranks, remote_ranks, reps, dtype_name.c_str(), delta.c_str(),
        delta == "off" ? 0.0 : changed, median(&Rep::wire_mb), mb,
        layout->tensors.size() + layout->aliases.size(), median(&Rep::total),
        median(&Rep::write), median(&Rep::load), median(&Rep::memcpy_s),
        median(&Rep::rank_extra_mb), median(&Rep::engine_extra_mb));
  } else {
    std::printf("hy weight sync, %d ranks (%d over c10d) -> 1 engine, "
                "%.1f MiB (%s), median of %d\n",
                ranks, remote_ranks, mb, dtype_name.c_str(), reps);
    std::printf("  %-34s %8.3f s\n", "sync (write + engine load)",
                median(&Rep::total));
    std::printf("  %-34s %8.3f s\n", "  ranks write the shared file",
                median(&Rep::write));
    std::printf("  %-34s %8.3f s\n", "  engine loads it",
                median(&Rep::load));
    if (remote_ranks > 0) {
      std::printf("  %-34s %8.3f MiB (delta %s, %g changed)\n",
                  "  sent over c10d", median(&Rep::wire_mb), delta.c_str(),
                  delta == "off" ? 0.0 : changed);
    }
    std::printf("  %-34s %8.3f s\n", "memcpy of the file's bytes",
                median(&Rep::memcpy_s));
    std::printf("  %-34s %8.1f MiB\n", "rank peak RSS above before",
                median(&Rep::rank_extra_mb));
    std::printf("  %-34s %8.1f MiB\n", "engine peak RSS above before",
                median(&Rep::engine_extra_mb));
  }
  return 0;
}

}  // namespace
}  // namespace hy

int main(int argc, char** argv) { return hy::Run(argc, argv); }
