// Heartbeat: failure detection through the job's key-value store (the c10d
// TCPStore). Each rank's thread bumps "hb/<rank>" every period and reads
// every other rank's counter; a counter that has not moved for `timeout`,
// or a store that stops answering (its host, rank 0, died), is a failure,
// reported once through the callback, from the heartbeat thread. A store
// whose host hangs (SIGSTOP, a stuck machine) keeps its sockets open and a
// store call then blocks for the store's own timeout (minutes): a watchdog
// thread reports a round that has not finished within `timeout` as a
// failure too, from the watchdog thread.
//
// Collectives that fail (a peer's connection reset) and the launcher seeing
// a process exit are the other two detectors; this one catches a rank that
// hangs or a machine that vanishes without closing its sockets.
//
// Ownership: the store is the caller's and must outlive the Heartbeat.
// Thread-safety: Stop() and the destructor from any one thread. While it
// runs, the heartbeat thread is the store's one other user (see
// c10d_transport.h's kv()).
#ifndef HY_RECOVERY_HEARTBEAT_H_
#define HY_RECOVERY_HEARTBEAT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "hy/reshard/transport.h"

namespace hy::recovery {

struct HeartbeatOptions {
  int64_t period_ms = 1000;
  int64_t timeout_ms = 5000;
  // If set, called from the heartbeat thread every period with each other
  // rank and the seconds since its counter last moved (for metrics).
  std::function<void(int peer, double age_seconds)> on_peer_age;
};

class Heartbeat {
 public:
  // Starts the thread. `on_failure` gets a description ("rank 2: no
  // heartbeat for 5.0 s", "heartbeat store: ...").
  Heartbeat(reshard::KeyValueStore* kv, int rank, int world_size,
            HeartbeatOptions options,
            std::function<void(const std::string&)> on_failure);
  ~Heartbeat();  // Stop().
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Stops beating and watching; no callback after it returns. Idempotent.
  void Stop();

 private:
  void Loop();
  void Watch();  // The watchdog thread.
  void Fail(const std::string& why);

  reshard::KeyValueStore* kv_;
  const int rank_;
  const int world_size_;
  const HeartbeatOptions options_;
  std::function<void(const std::string&)> on_failure_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // Guarded by mu_.
  // When the heartbeat thread last finished a round (or started), in
  // steady_clock ticks.
  std::atomic<int64_t> round_done_{0};
  std::thread thread_;
  std::thread watchdog_;
};

}  // namespace hy::recovery

#endif  // HY_RECOVERY_HEARTBEAT_H_
