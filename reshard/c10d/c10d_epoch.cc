// AgreeEpoch (see c10d_epoch.h).

#include "c10d_epoch.h"

#include <chrono>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace hy::reshard::c10d_internal {
namespace {

std::vector<uint8_t> Bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

}  // namespace

int64_t AgreeEpoch(c10d::Store& store, const std::string& base, int rank,
                   int world_size, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (rank != 0) {
    std::random_device rd;
    const std::string nonce =
        std::to_string(rd()) + "-" + std::to_string(rd()) + "-" +
        std::to_string(std::chrono::steady_clock::now().time_since_epoch()
                           .count());
    store.set(base + "/ready/" + std::to_string(rank), Bytes(nonce));
    const std::string ack = base + "/ack/" + std::to_string(rank) + "/" + nonce;
    store.wait({ack}, timeout);
    const std::vector<uint8_t> v = store.get(ack);
    const int64_t epoch = std::stoll(std::string(v.begin(), v.end()));
    store.set(base + "/done/" + std::to_string(epoch) + "/" +
                  std::to_string(rank),
              Bytes("1"));
    return epoch;
  }
  const int64_t epoch = store.add(base + "/epoch", 1);
  std::vector<std::string> acked(world_size);
  std::vector<int> pending;
  for (int r = 1; r < world_size; ++r) pending.push_back(r);
  while (!pending.empty()) {
    std::vector<int> still;
    for (int r : pending) {
      const std::string ready = base + "/ready/" + std::to_string(r);
      if (store.check({base + "/done/" + std::to_string(epoch) + "/" +
                       std::to_string(r)})) {
        continue;
      }
      still.push_back(r);
      if (!store.check({ready})) continue;
      const std::vector<uint8_t> v = store.get(ready);
      const std::string nonce(v.begin(), v.end());
      if (nonce == acked[r]) continue;
      store.set(base + "/ack/" + std::to_string(r) + "/" + nonce,
                Bytes(std::to_string(epoch)));
      acked[r] = nonce;
    }
    pending.swap(still);
    if (pending.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("timed out: rank " +
                               std::to_string(pending[0]) +
                               " never took the store epoch");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return epoch;
}

}  // namespace hy::reshard::c10d_internal
