// Transport: how the ranks of a reshard exchange bytes. One Transport
// object per rank; every rank calls the same collective methods in the same
// order (as with MPI / c10d collectives).
//
// Implementations: InProcessHub (threads of one process, below) and the
// c10d Gloo transport (hy/reshard/c10d_transport.h, the only LibTorch user in
// reshard). On device buffers, NcclExecutor (hy/reshard/nccl_executor.h) is a
// separate executor that talks to NCCL directly, not a Transport.
//
// Errors: a collective that fails or times out returns a Status
// (DeadlineExceeded, Unavailable, Internal, ...) on the ranks that see it;
// after an error a transport is unusable and every further call fails.
//
// Thread-safety: one Transport is used by one thread at a time.

#ifndef HY_RESHARD_TRANSPORT_H_
#define HY_RESHARD_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/result.h"

namespace hy::reshard {

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // A short name for logs and metrics: "local", "gloo", "nccl".
  virtual const char* name() const = 0;

  // Variable-size all-to-all: sends send[p] to rank p (send.size() ==
  // world_size(); send[rank()] is ignored and may be empty) and returns in
  // (*recv)[p] the bytes rank p sent to this rank, sizes not known in
  // advance. (*recv)[rank()] is left empty.
  virtual Status AllToAllV(const std::vector<ConstBytes>& send,
                           std::vector<std::vector<uint8_t>>* recv) = 0;

  // Every rank contributes `in`; returns in (*out)[p] rank p's bytes.
  virtual Status AllGatherV(ConstBytes in,
                            std::vector<std::vector<uint8_t>>* out) = 0;

  // AllGatherV with every rank's size known in advance: rank p's bytes are
  // written straight into out[p] (out.size() == world_size(); out[rank()]
  // is not written; a rank sending nothing has an empty out[p]). Returns
  // Internal on a rank that expected another size from some rank than it
  // sent (nothing else is lost), else as AllGatherV. The default gathers
  // through AllGatherV and copies; transports that can receive in place
  // override it (no second copy of the gathered bytes).
  virtual Status AllGatherInto(ConstBytes in,
                               const std::vector<MutableBytes>& out);

  virtual Status Barrier() = 0;
};

// A process-local rendezvous for world_size threads. Create one hub, then
// Connect(rank) once per rank; the transports must outlive no hub.
// Collectives wait at most `timeout_ms` for the other ranks and then return
// DeadlineExceeded.
class InProcessHub {
 public:
  explicit InProcessHub(int world_size, int64_t timeout_ms = 60000);
  ~InProcessHub();
  InProcessHub(const InProcessHub&) = delete;
  InProcessHub& operator=(const InProcessHub&) = delete;

  // REQUIRES: 0 <= rank < world_size, each rank connected once.
  std::unique_ptr<Transport> Connect(int rank);

  struct State;  // Internal: the shared mailbox.

 private:
  std::shared_ptr<State> state_;
};

// A small key-value store shared by the ranks of a job (the c10d TCPStore
// in practice): how the NCCL communicator exchanges its unique id.
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual Status Set(const std::string& key, const std::string& value) = 0;
  // Waits up to the store's timeout for the key. Returns DeadlineExceeded
  // if it does not appear.
  virtual Result<std::string> Get(const std::string& key) = 0;
};

}  // namespace hy::reshard

#endif  // HY_RESHARD_TRANSPORT_H_
