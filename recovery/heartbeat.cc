// Heartbeat (see hy/recovery/heartbeat.h).

#include "hy/recovery/heartbeat.h"

#include <chrono>
#include <cstdio>
#include <vector>

namespace hy::recovery {

using Clock = std::chrono::steady_clock;

Heartbeat::Heartbeat(reshard::KeyValueStore* kv, int rank, int world_size,
                     HeartbeatOptions options,
                     std::function<void(const std::string&)> on_failure)
    : kv_(kv),
      rank_(rank),
      world_size_(world_size),
      options_(options),
      on_failure_(std::move(on_failure)) {
  round_done_ = Clock::now().time_since_epoch().count();
  thread_ = std::thread([this] { Loop(); });
  watchdog_ = std::thread([this] { Watch(); });
}

Heartbeat::~Heartbeat() { Stop(); }

void Heartbeat::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::Fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!stop_ && on_failure_) on_failure_(why);
  stop_ = true;
  cv_.notify_all();
}

void Heartbeat::Watch() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(options_.period_ms),
                   [this] { return stop_; });
      if (stop_) return;
    }
    const Clock::duration since =
        Clock::now().time_since_epoch() - Clock::duration(round_done_.load());
    // A round is a Set and world_size - 1 Gets, every period.
    if (since > std::chrono::milliseconds(options_.timeout_ms +
                                          options_.period_ms)) {
      char secs[32];
      std::snprintf(secs, sizeof(secs), "%.1f",
                    std::chrono::duration<double>(since).count());
      return Fail(std::string("heartbeat store: no answer for ") + secs +
                  " s (its host, rank 0, hangs or is cut off)");
    }
  }
}

void Heartbeat::Loop() {
  struct Seen {
    std::string value;
    Clock::time_point since = Clock::now();
  };
  std::vector<Seen> seen(world_size_);
  uint64_t beat = 0;
  auto fail = [this](const std::string& why) { Fail(why); };
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (beat > 0) {
        cv_.wait_for(lock, std::chrono::milliseconds(options_.period_ms),
                     [this] { return stop_; });
      }
      if (stop_) return;
    }
    Status s = kv_->Set("hb/" + std::to_string(rank_), std::to_string(++beat));
    if (!s.ok()) return fail("heartbeat store: " + s.ToString());
    const Clock::time_point now = Clock::now();
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_) continue;
      Result<std::string> v = kv_->Get("hb/" + std::to_string(r));
      if (!v.ok()) {
        return fail("heartbeat of rank " + std::to_string(r) + ": " +
                    v.status().ToString());
      }
      if (*v != seen[r].value) seen[r] = {*v, now};
      const double age =
          std::chrono::duration<double>(now - seen[r].since).count();
      if (options_.on_peer_age) options_.on_peer_age(r, age);
      if (now - seen[r].since >
          std::chrono::milliseconds(options_.timeout_ms)) {
        char secs[32];
        std::snprintf(secs, sizeof(secs), "%.1f", age);
        return fail("rank " + std::to_string(r) + ": no heartbeat for " + secs +
                    " s");
      }
    }
    round_done_ = Clock::now().time_since_epoch().count();
  }
}

}  // namespace hy::recovery
