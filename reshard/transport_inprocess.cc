// InProcessHub: ranks as threads of one process, exchanging through a
// mailbox keyed by (collective number, source, destination); and
// ReshardInProcess, which runs a plan's executors on such a hub.

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "hy/reshard/executor.h"
#include "hy/reshard/transport.h"

namespace hy::reshard {

struct InProcessHub::State {
  explicit State(int world, int64_t timeout)
      : world_size(world), timeout_ms(timeout) {}
  const int world_size;
  const int64_t timeout_ms;
  std::mutex mu;
  std::condition_variable cv;
  // (round, src, dst) -> bytes.
  std::map<std::tuple<uint64_t, int, int>, std::vector<uint8_t>> mail;
  std::map<uint64_t, int> arrived;    // round -> ranks that posted.
  std::map<uint64_t, int> collected;  // round -> ranks that took theirs.
};

namespace {

class InProcessTransport final : public Transport {
 public:
  InProcessTransport(std::shared_ptr<InProcessHub::State> state, int rank)
      : state_(std::move(state)), rank_(rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return state_->world_size; }
  const char* name() const override { return "local"; }

  Status AllToAllV(const std::vector<ConstBytes>& send,
                   std::vector<std::vector<uint8_t>>* recv) override {
    const int world = state_->world_size;
    if (static_cast<int>(send.size()) != world) {
      return Status::InvalidArgument(
          "AllToAllV: send has " + std::to_string(send.size()) +
          " entries for " + std::to_string(world) + " ranks");
    }
    std::vector<std::vector<uint8_t>> copies(world);
    for (int p = 0; p < world; ++p) {
      if (p != rank_)
        copies[p].assign(send[p].data(), send[p].data() + send[p].size());
    }
    return Exchange(std::move(copies), recv);
  }

  Status AllGatherV(ConstBytes in,
                    std::vector<std::vector<uint8_t>>* out) override {
    const int world = state_->world_size;
    std::vector<std::vector<uint8_t>> copies(
        world, std::vector<uint8_t>(in.data(), in.data() + in.size()));
    HY_RETURN_IF_ERROR(Exchange(std::move(copies), out));
    (*out)[rank_].assign(in.data(), in.data() + in.size());
    return Status::OK();
  }

  Status Barrier() override {
    std::vector<std::vector<uint8_t>> none(state_->world_size), out;
    return Exchange(std::move(none), &out);
  }

 private:
  Status Exchange(std::vector<std::vector<uint8_t>> send,
                  std::vector<std::vector<uint8_t>>* recv) {
    if (!error_.ok()) return error_;
    InProcessHub::State& s = *state_;
    const uint64_t round = round_++;
    std::unique_lock<std::mutex> lock(s.mu);
    for (int p = 0; p < s.world_size; ++p) {
      if (p != rank_) s.mail[{round, rank_, p}] = std::move(send[p]);
    }
    s.arrived[round] += 1;
    s.cv.notify_all();
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(s.timeout_ms);
    if (!s.cv.wait_until(lock, deadline,
                         [&] { return s.arrived[round] == s.world_size; })) {
      error_ = Status::DeadlineExceeded(
          "in-process collective " + std::to_string(round) + ": rank " +
          std::to_string(rank_) + " waited " + std::to_string(s.timeout_ms) +
          " ms for " + std::to_string(s.world_size - s.arrived[round]) +
          " other rank(s)");
      return error_;
    }
    recv->assign(s.world_size, {});
    for (int p = 0; p < s.world_size; ++p) {
      if (p == rank_) continue;
      auto it = s.mail.find({round, p, rank_});
      (*recv)[p] = std::move(it->second);
      s.mail.erase(it);
    }
    // The last rank to collect drops the round's counters.
    if (++s.collected[round] == s.world_size) {
      s.arrived.erase(round);
      s.collected.erase(round);
    }
    return Status::OK();
  }

  std::shared_ptr<InProcessHub::State> state_;
  const int rank_;
  uint64_t round_ = 0;
  Status error_;
};

}  // namespace

InProcessHub::InProcessHub(int world_size, int64_t timeout_ms)
    : state_(std::make_shared<State>(world_size, timeout_ms)) {}

InProcessHub::~InProcessHub() = default;

std::unique_ptr<Transport> InProcessHub::Connect(int rank) {
  return std::make_unique<InProcessTransport>(state_, rank);
}

Status ReshardInProcess(std::shared_ptr<const TransferPlan> plan,
                        const std::vector<std::vector<ConstBytes>>& src,
                        const std::vector<std::vector<MutableBytes>>& dst,
                        const ExecutorOptions& options, ReshardStats* stats) {
  const int world = plan->topology.world_size;
  if (static_cast<int>(src.size()) != world ||
      static_cast<int>(dst.size()) != world) {
    return Status::InvalidArgument(
        "ReshardInProcess: buffers for " + std::to_string(src.size()) + " / " +
        std::to_string(dst.size()) + " ranks, the plan has " +
        std::to_string(world));
  }
  InProcessHub hub(world);
  std::vector<Status> status(world);
  std::vector<ReshardStats> per_rank(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto transport = hub.Connect(r);
      Executor executor(plan, transport.get(), options);
      status[r] = executor.Run(src[r], dst[r], &per_rank[r]);
    });
  }
  for (auto& t : threads) t.join();
  ReshardStats merged;
  for (int r = 0; r < world; ++r) merged.Merge(per_rank[r]);
  if (stats != nullptr) *stats = merged;
  for (int r = 0; r < world; ++r) {
    if (!status[r].ok()) return status[r];
  }
  return Status::OK();
}

}  // namespace hy::reshard
