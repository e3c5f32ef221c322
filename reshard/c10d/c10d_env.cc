// The parts of the c10d transport that need no LibTorch header: torchrun's
// environment. Kept apart from c10d_transport.cc,
// whose LibTorch includes make it slow to compile.

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>

#include "hy/reshard/c10d_transport.h"

namespace hy::reshard {
namespace {

// Reads environment variable `name` as a decimal int in [lo, hi].
// `*present` says whether it is set at all; a variable that is not set is
// an error only when `required`.
Status ReadIntEnv(const char* name, bool required, int lo, int hi, int* out,
                  bool* present = nullptr) {
  const char* text = std::getenv(name);
  if (present != nullptr) *present = text != nullptr;
  if (text == nullptr) {
    if (!required) return Status::OK();
    return Status::InvalidArgument(std::string("environment variable ") + name +
                                   " is not set (torchrun sets it)");
  }
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || errno != 0 || value < lo || value > hi) {
    return Status::InvalidArgument(std::string("environment variable ") + name +
                                   "='" + text + "' is not an integer in [" +
                                   std::to_string(lo) + ", " +
                                   std::to_string(hi) + "]");
  }
  *out = static_cast<int>(value);
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<C10dTransport>> C10dTransport::FromEnv(
    const C10dTransportOptions& options) {
  int world_size = 0;
  int rank = 0;
  int local_rank = 0;
  int port = 0;
  bool has_local_rank = false;
  HY_RETURN_IF_ERROR(ReadIntEnv("WORLD_SIZE", true, 1, 1 << 20, &world_size));
  HY_RETURN_IF_ERROR(ReadIntEnv("RANK", true, 0, world_size - 1, &rank));
  HY_RETURN_IF_ERROR(
      ReadIntEnv("LOCAL_RANK", false, 0, rank, &local_rank, &has_local_rank));
  HY_RETURN_IF_ERROR(ReadIntEnv("MASTER_PORT", true, 1, 65535, &port));
  const char* addr = std::getenv("MASTER_ADDR");
  if (addr == nullptr || *addr == '\0') {
    return Status::InvalidArgument(
        "environment variable MASTER_ADDR is not set or empty (torchrun "
        "sets it)");
  }
  C10dTransportOptions opts = options;
  const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (agent_store != nullptr && std::string(agent_store) == "True") {
    opts.rank0_hosts_store = false;
    opts.fresh_namespace = true;  // The agent's store outlives rounds.
  }
  HY_ASSIGN_OR_RETURN(std::unique_ptr<C10dTransport> transport,
                      Connect(rank, world_size, addr, port, opts));
  if (has_local_rank) {
    transport->local_rank_ = local_rank;
  }
  return transport;
}

}  // namespace hy::reshard
