// hy_bench_recovery: how long a job takes from losing a rank to running again
// on the survivors, with its state rebuilt under the new layout.
//
//   hy_bench_recovery [--json] [--gib G] [--ranks W] [--warm] [--dir DIR]
//                     [--bound-mb M] [--heartbeat-ms T]
//
// Setup: W ranks (threads) each hold an FSDP flat shard of 8 fp32 tensors and
// their two Adam moments (G GiB in all, normal-ish random values so zstd has
// real work) and save step 10 through checkpoint::Checkpointer with one replica
// per part. Then rank 2's node directory is deleted (the node is lost) and:
//
//   detect     heartbeats (timeout --heartbeat-ms, 1000 by default, period a
//              tenth of it) over an in-memory key-value store; rank 2 stops
//              beating; until a survivor sees it. A hung or vanished host
//              is found no sooner than the timeout; a process that exits
//              is found at once by the launcher and by its peers' broken
//              connections, which this does not time
//   plan       Recovery::Open on the W-1 survivors: scan, settle, choose,
//              verify checksums
//   fetch      Recovery::Fetch of each survivor's fsdp=W-1 shard of every
//              tensor: local reads plus the all-to-all (read / exchange rows)
//   replicate  each survivor saves its rebuilt shards as step 10 of the next
//              generation with one replica per part, and waits for the commit
//              (the trainer does this in the background: training resumes
//              once the state is rebuilt, and R copies are back when this
//              finishes)
//
// --bound-mb M bounds each rank's checkpoint staging and replication
// buffers (CheckpointOptions::staging_bytes; messages stay at most 16 MiB)
// and its fetch rounds (RecoveryOptions::fetch_bytes); 0 keeps the
// defaults (1 GiB staging, 64 MiB holder buffers and fetch rounds, 16 MiB
// messages). The ranks share one process, so the memory
// columns are the process's peak RSS above what it held when the phase
// began (fetch: above the rebuilt state's buffers too), for all ranks.
//
// Every rebuilt element is compared with the original; a mismatch exits 1.
// Reads are cold (page cache dropped before plan) unless --warm. Seconds are
// the slowest rank's; MB are 10^6 bytes.

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_flags.h"
#include "bench_util.h"
#include "hy/checkpoint/checkpoint.h"
#include "hy/common/process_memory.h"
#include "hy/recovery/heartbeat.h"
#include "hy/recovery/node_layout.h"
#include "hy/recovery/recovery.h"
#include "hy/reshard/transport.h"

namespace hy::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTensors = 8;  // Of each kind; 3 * kTensors in all.
constexpr int64_t kCols = 1024;
constexpr uint64_t kStep = 10;
constexpr int64_t kLongMs = 600000;  // Hub / commit timeouts: 2 slow cores.
const char* const kKinds[3] = {"param", "exp_avg", "exp_avg_sq"};

struct Flags {
  bool json = false;
  double gib = 1.0;
  int ranks = 4;
  bool warm = false;
  std::string dir = "/tmp";
  uint64_t bound_mb = 0;
  int64_t heartbeat_ms = 1000;  // The heartbeat's timeout; period 1/10.
};

// Peak RSS growth of the process from now on, in MB (10^6 bytes).
class PeakGrowth {
 public:
  PeakGrowth() : start_(ResidentBytes()) { ResetPeakResident(); }
  double mb() const { return (PeakResidentBytes() - start_) / 1e6; }

 private:
  int64_t start_;
};

void Check(const Status& s, const std::string& what) {
  if (s.ok()) return;
  std::fprintf(stderr, "hy_bench_recovery: %s: %s\n", what.c_str(),
               s.ToString().c_str());
  std::exit(1);
}

// Runs fn(rank) on `world` threads and joins them.
void RunRanks(int world, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Element i of tensor j (kind j / kTensors: 0 param, 1 exp_avg, 2
// exp_avg_sq): a standard normal made of four uniforms, scaled per kind.
float Value(int j, int64_t i) {
  const int k = j / kTensors;
  const uint64_t h = SplitMix((uint64_t(j) << 40) | uint64_t(i));
  const int64_t s = int64_t(h & 0xffff) + int64_t((h >> 16) & 0xffff) +
                    int64_t((h >> 32) & 0xffff) + int64_t(h >> 48) - 131070;
  const float z = static_cast<float>(s) * (1.7320508f / 65536.0f);
  if (k == 0) return 0.02f * z;
  if (k == 1) return 1e-3f * z;
  return 1e-6f * z * z;
}

std::string Name(int j) {
  return std::string(kKinds[j / kTensors]) + "/layer" +
         std::to_string(j % kTensors) + ".weight";
}

FlatRun Piece(int64_t n, int w, int r) {
  return {n * r / w, n * (r + 1) / w - n * r / w};
}

// A rank's FSDP flat shards: the same piece of every (equal-size) tensor.
struct RankState {
  FlatRun piece;
  std::vector<std::vector<float>> bufs;  // Index: tensor j.
};

RankState MakeShards(int64_t rows, int world, int rank, bool fill) {
  RankState s;
  s.piece = Piece(rows * kCols, world, rank);
  s.bufs.assign(3 * kTensors, std::vector<float>(s.piece.length));
  for (int j = 0; fill && j < 3 * kTensors; ++j) {
    for (int64_t i = 0; i < s.piece.length; ++i) {
      s.bufs[j][i] = Value(j, s.piece.offset + i);
    }
  }
  return s;
}

std::vector<statestore::ShardData> Shards(const RankState& s, int64_t rows) {
  std::vector<statestore::ShardData> out;
  for (int j = 0; j < 3 * kTensors; ++j) {
    out.push_back({TensorMeta{Name(j), DType::kF32, {rows, kCols}},
                   ShardGeometry::FromRuns({s.piece}),
                   ConstBytes(s.bufs[j].data(), s.bufs[j].size() * 4)});
  }
  return out;
}

// Every rank saves step 10 with one replica per part; returns the seconds.
double SaveAll(const std::string& root, const std::vector<int>& nodes,
               uint32_t generation, std::vector<RankState>* states,
               int64_t rows, uint64_t bound_bytes) {
  const int world = static_cast<int>(nodes.size());
  reshard::InProcessHub hub(world, kLongMs);
  const auto t0 = Clock::now();
  RunRanks(world, [&](int r) {
    auto transport = hub.Connect(r);
    checkpoint::CheckpointOptions o;
    o.root = root;
    o.rank = r;
    o.world_size = world;
    o.nodes = nodes;
    o.generation = generation;
    o.replicas = 1;
    o.transport = transport.get();
    o.keep_last = 2;
    o.commit_timeout_ms = kLongMs;
    o.staging_bytes = bound_bytes;
    auto ckpt = checkpoint::Checkpointer::Open(o);
    Check(ckpt.status(), "Checkpointer::Open rank " + std::to_string(r));
    Check((*ckpt)->Save(kStep, Shards((*states)[r], rows), {},
                        "fsdp=" + std::to_string(world), "bench"),
          "Save rank " + std::to_string(r));
    Check((*ckpt)->Wait(), "Wait rank " + std::to_string(r));
  });
  return Since(t0);
}

// A thread-safe map; Get waits for the key up to timeout_ms.
class MemoryKv : public reshard::KeyValueStore {
 public:
  explicit MemoryKv(int64_t timeout_ms) : timeout_ms_(timeout_ms) {}
  Status Set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      map_[key] = value;
    }
    cv_.notify_all();
    return Status::OK();
  }
  Result<std::string> Get(const std::string& key) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms_),
                      [&] { return map_.count(key) > 0; })) {
      return Status::DeadlineExceeded("key " + key + " never set");
    }
    return map_[key];
  }

 private:
  const int64_t timeout_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> map_;
};

// Seconds from rank `dead` stopping its heartbeat to a survivor's callback.
double Detect(int world, int dead, int64_t period_ms, int64_t timeout_ms,
              std::string* why) {
  MemoryKv kv(5000);
  std::mutex mu;
  std::condition_variable cv;
  bool fired = false;
  Clock::time_point fired_at;
  recovery::HeartbeatOptions o;
  o.period_ms = period_ms;
  o.timeout_ms = timeout_ms;
  std::vector<std::unique_ptr<recovery::Heartbeat>> hbs;
  for (int r = 0; r < world; ++r) {
    hbs.push_back(std::make_unique<recovery::Heartbeat>(
        &kv, r, world, o, [&](const std::string& w) {
          std::lock_guard<std::mutex> lock(mu);
          if (fired) return;
          fired = true;
          fired_at = Clock::now();
          *why = w;
          cv.notify_all();
        }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t0 = Clock::now();
  hbs[dead]->Stop();
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(30), [&] { return fired; })) {
      Check(Status::DeadlineExceeded("no survivor saw the failure"), "detect");
    }
  }
  for (auto& h : hbs) h->Stop();
  return std::chrono::duration<double>(fired_at - t0).count();
}

struct Survivor {
  double open_s = 0, fetch_s = 0;
  recovery::RecoveryStats stats;
  uint32_t next_generation = 0;
  std::vector<std::string> log;
};

// Open + Fetch on the survivors; checks every element; fills `states`.
std::vector<Survivor> Recover(const std::string& root,
                              const std::vector<int>& nodes, int64_t rows,
                              uint64_t bound_bytes,
                              std::vector<RankState>* states) {
  const int world = static_cast<int>(nodes.size());
  reshard::InProcessHub hub(world, kLongMs);
  std::vector<Survivor> out(world);
  RunRanks(world, [&](int r) {
    auto transport = hub.Connect(r);
    Survivor& me = out[r];
    recovery::RecoveryOptions o;
    o.root = root;
    o.nodes = nodes;
    if (bound_bytes > 0) o.fetch_bytes = bound_bytes;
    o.log = [&me](const std::string& line) { me.log.push_back(line); };
    const std::string who = "rank " + std::to_string(r);
    auto t0 = Clock::now();
    auto rec = recovery::Recovery::Open(transport.get(), o);
    me.open_s = Since(t0);
    Check(rec.status(), "Recovery::Open " + who);
    if (!(*rec)->has_state()) Check(Status::NotFound("no state"), who);
    RankState& s = (*states)[r];
    s = MakeShards(rows, world, r, /*fill=*/false);
    std::vector<recovery::TensorNeed> needs;
    for (int j = 0; j < 3 * kTensors; ++j) {
      needs.push_back({Name(j), s.piece,
                       MutableBytes(s.bufs[j].data(), s.bufs[j].size() * 4)});
    }
    t0 = Clock::now();
    Check((*rec)->Fetch(needs), "Recovery::Fetch " + who);
    me.fetch_s = Since(t0);
    me.stats = (*rec)->stats();
    me.next_generation = (*rec)->next_generation();
    for (int j = 0; j < 3 * kTensors; ++j) {
      for (int64_t i = 0; i < s.piece.length; ++i) {
        const float want = Value(j, s.piece.offset + i);
        if (std::memcmp(&s.bufs[j][i], &want, 4) == 0) continue;
        std::fprintf(stderr,
                     "hy_bench_recovery: MISMATCH %s: %s element %lld: "
                     "got %g, want %g\n",
                     who.c_str(), Name(j).c_str(),
                     static_cast<long long>(s.piece.offset + i), s.bufs[j][i],
                     want);
        std::exit(1);
      }
    }
  });
  return out;
}

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app(
      "From losing a rank to running again on the survivors, the state "
      "rebuilt under the new layout",
      "hy_bench_recovery");
  AddJsonFlag(&app, &f.json);
  app.add_option("--gib", f.gib, "fp32 state in GiB")
      ->capture_default_str()
      ->check(Positive());
  app.add_option("--ranks", f.ranks, "Ranks before the loss")
      ->capture_default_str()
      ->check(AtLeast(2));
  app.add_flag("--warm", f.warm, "Keep the stores in the page cache");
  app.add_option("--dir", f.dir, "Where the run root goes")
      ->capture_default_str();
  app.add_option("--bound-mb", f.bound_mb,
                 "Bound on the read-back memory in MB (0: none)")
      ->capture_default_str();
  app.add_option("--heartbeat-ms", f.heartbeat_ms,
                 "Heartbeat timeout in ms (period: a tenth of it)")
      ->capture_default_str()
      ->check(AtLeast(10));
  if (int code = ParseFlags(&app, argc, argv); code >= 0) return code;
  const int world = f.ranks, dead = std::min(2, world - 1);
  const int64_t period_ms = f.heartbeat_ms / 10;  // >= 1: --heartbeat-ms >= 10.
  // 3 tensors (param, exp_avg, exp_avg_sq) of 8 [rows, 1024] fp32 each.
  const int64_t rows = std::max<int64_t>(
      1, static_cast<int64_t>(f.gib * (1ull << 30) / (3.0 * kTensors * 4)) /
             kCols);
  const double total_mb = 3.0 * kTensors * rows * kCols * 4 / 1e6;
  std::string root = f.dir + "/hy-bench-recovery-XXXXXX";
  if (mkdtemp(root.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }

  std::vector<int> old_nodes, new_nodes;
  for (int r = 0; r < world; ++r) {
    old_nodes.push_back(r);
    if (r != dead) new_nodes.push_back(r);
  }
  std::vector<RankState> old_states(world);
  RunRanks(world,
           [&](int r) { old_states[r] = MakeShards(rows, world, r, true); });
  const uint64_t bound = f.bound_mb << 20;
  const double save_s = SaveAll(root, old_nodes, 0, &old_states, rows, bound);
  old_states.clear();
  old_states.shrink_to_fit();

  // The node is lost, and so is its rank.
  std::filesystem::remove_all(recovery::NodeDir(root, dead));
  if (!f.warm) DropPageCache(root);
  std::string why;
  const double detect_s = Detect(world, dead, period_ms, f.heartbeat_ms, &why);

  std::vector<RankState> new_states(world - 1);
  const PeakGrowth fetch_memory;
  const std::vector<Survivor> sv =
      Recover(root, new_nodes, rows, bound, &new_states);
  const double fetch_peak_mb = fetch_memory.mb() - total_mb;
  double plan_s = 0, open_s = 0, read_s = 0, exch_s = 0, fetch_s = 0;
  uint64_t local = 0, received = 0, largest_round = 0;
  int rounds = 0;
  for (const Survivor& s : sv) {
    rounds = std::max(rounds, s.stats.fetch_rounds);
    largest_round = std::max(largest_round, s.stats.largest_round_bytes);
    plan_s = std::max(plan_s, s.stats.scan_seconds + s.stats.verify_seconds);
    open_s = std::max(open_s, s.open_s);
    read_s = std::max(read_s, s.stats.read_seconds);
    exch_s = std::max(exch_s, s.stats.exchange_seconds);
    fetch_s = std::max(fetch_s, s.fetch_s);
    local += s.stats.local_bytes;
    received += s.stats.received_bytes;
  }
  const uint32_t gen = sv[0].next_generation;
  const PeakGrowth replicate_memory;
  const double replicate_s =
      SaveAll(root, new_nodes, gen, &new_states, rows, bound);
  const double replicate_peak_mb = replicate_memory.mb();
  // Walls, not the stats: what the job waits for.
  const double rebuilt_s = detect_s + open_s + fetch_s;
  const double total_s = rebuilt_s;  // Training resumes here.
  const double restored_s = rebuilt_s + replicate_s;
  const bool met = total_s <= 10.0;
  std::error_code ec;
  std::filesystem::remove_all(root, ec);

  char note[160];
  if (f.json) {
    std::printf(
        "{\"bench\":\"recovery\",\"gib\":%.3f,\"ranks\":%d,\"lost_rank\":%d,"
        "\"state_mb\":%.1f,\"cold\":%s,\"save_s\":%.3f,\"detect_s\":%.3f,"
        "\"detect_period_ms\":%lld,\"detect_timeout_ms\":%lld,"
        "\"plan_s\":%.3f,\"open_wall_s\":%.3f,\"read_s\":%.3f,"
        "\"exchange_s\":%.3f,\"fetch_wall_s\":%.3f,\"local_mb\":%.1f,"
        "\"received_mb\":%.1f,\"replicate_s\":%.3f,\"generation\":%u,"
        "\"rebuilt_s\":%.3f,\"total_s\":%.3f,\"replicas_restored_s\":%.3f,"
        "\"target_s\":10,\"target_met\":%s,\"bound_mb\":%llu,"
        "\"fetch_rounds\":%d,\"largest_round_mb\":%.1f,"
        "\"fetch_peak_growth_mb\":%.1f,\"replicate_peak_growth_mb\":%.1f,"
        "\"verified\":true}\n",
        f.gib, world, dead, total_mb, f.warm ? "false" : "true", save_s,
        detect_s, static_cast<long long>(period_ms),
        static_cast<long long>(f.heartbeat_ms), plan_s, open_s, read_s, exch_s,
        fetch_s, local / 1e6, received / 1e6, replicate_s, gen, rebuilt_s,
        total_s, restored_s, met ? "true" : "false",
        static_cast<unsigned long long>(f.bound_mb), rounds,
        largest_round / 1e6, fetch_peak_mb, replicate_peak_mb);
    return 0;
  }
  std::printf(
      "hy_bench_recovery: %.1f MB fp32 state (8 tensors x param/exp_avg/"
      "exp_avg_sq), %d ranks -> %d, lost rank %d, replicas=1, %s reads\n\n",
      total_mb, world, world - 1, dead, f.warm ? "warm" : "cold");
  std::printf("| %-34s | %8s | %8s | %s\n", "phase", "seconds", "MB", "note");
  std::printf("|%s|%s|%s|------|\n", std::string(36, '-').c_str(),
              std::string(10, '-').c_str(), std::string(10, '-').c_str());
  auto row = [](const char* phase, double s, double mb, const char* n) {
    std::printf("| %-34s | %8.3f | %8.1f | %s\n", phase, s, mb, n);
  };
  std::snprintf(note, sizeof(note), "setup, not timed in total; %d ranks",
                world);
  row("save step 10 (before the loss)", save_s, total_mb, note);
  char phase[64];
  std::snprintf(phase, sizeof(phase), "detect (heartbeat timeout %lld ms)",
                static_cast<long long>(f.heartbeat_ms));
  std::snprintf(note, sizeof(note), "~ the timeout, +/- one %lld ms period",
                static_cast<long long>(period_ms));
  row(phase, detect_s, 0, note);
  std::snprintf(note, sizeof(note), "scan+settle+choose+verify; wall %.3f s",
                open_s);
  row("plan (Recovery::Open)", plan_s, 0, note);
  row("  read (local copies)", read_s, local / 1e6, "MB read on own node");
  row("  reshard (all-to-all)", exch_s, received / 1e6, "MB from other nodes");
  row("fetch wall (read + reshard)", fetch_s, total_mb,
      "every element checked against the original");
  std::snprintf(note, sizeof(note),
                "%d rounds, largest %.1f MB; peak RSS above the state, "
                "all ranks",
                rounds, largest_round / 1e6);
  row("  fetch working memory (MB)", 0, fetch_peak_mb, note);
  row("total: lost rank -> resumed", total_s, total_mb,
      "detect + plan wall + fetch wall: training goes on");
  std::snprintf(note, sizeof(note),
                "step 10, generation %u, %d ranks, replicas=1, committed", gen,
                world - 1);
  row("replicate (background save + Wait)", replicate_s, total_mb, note);
  std::snprintf(note, sizeof(note), "peak RSS growth, all ranks; bound %s",
                f.bound_mb == 0
                    ? "default (1 GiB staging, 64 MiB holder buffers)"
                    : (std::to_string(f.bound_mb) + " MiB").c_str());
  row("  replicate working memory (MB)", 0, replicate_peak_mb, note);
  row("lost rank -> R copies restored", restored_s, total_mb,
      "total + replicate (beside training)");
  std::printf("\ndetected: %s\n", why.c_str());
  for (const std::string& line : sv[0].log) {
    std::printf("recovery log (rank 0): %s\n", line.c_str());
  }
  std::printf("target: lost rank -> resumed on %d ranks <= 10 s: %s\n",
              world - 1, met ? "met" : "not met");
  return 0;
}

}  // namespace
}  // namespace hy::bench

int main(int argc, char** argv) { return hy::bench::Main(argc, argv); }
