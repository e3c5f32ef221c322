// The store handshake behind C10dTransportOptions::fresh_namespace, apart
// from c10d_transport.cc. Internal to hy_reshard_c10d.
//
// Thread-safety: AgreeEpoch is called by one thread per rank, collectively.

#ifndef HY_RESHARD_C10D_C10D_EPOCH_H_
#define HY_RESHARD_C10D_C10D_EPOCH_H_

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace hy::reshard::c10d_internal {

// The epoch of fresh_namespace (see C10dTransportOptions). Keys of earlier
// groups may sit under every name, so a rank trusts only a key whose name
// holds something fresh: rank 0 draws a new epoch (an atomic counter), each
// other rank publishes a random nonce under ready/<rank> and waits for
// ack/<rank>/<its nonce>, which rank 0 writes for every value it sees
// there (stale ones too: nobody waits for those); a rank that has the
// epoch says so under done/<epoch>/<rank>, and rank 0 acks until all have.
// The ranks of the earlier groups are gone (torchrun stops every worker
// before a new round), so nothing rewrites these keys meanwhile.
// Returns the epoch every rank agreed on; throws what the store throws, or
// std::runtime_error when a rank never takes the epoch within `timeout`.
int64_t AgreeEpoch(c10d::Store& store, const std::string& base, int rank,
                   int world_size, std::chrono::milliseconds timeout);

}  // namespace hy::reshard::c10d_internal

#endif  // HY_RESHARD_C10D_C10D_EPOCH_H_
