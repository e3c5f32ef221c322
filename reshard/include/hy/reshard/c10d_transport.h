// C10dTransport: the reshard Transport over LibTorch's c10d ProcessGroupGloo
// and TCPStore, for host buffers on ranks in separate processes (one per
// rank, as torchrun starts them).
//
//   AllToAllV   exchanges the per-peer byte counts with an int64
//               alltoall_base, then posts one Gloo send and one recv per
//               peer with a non-empty message, straight from the caller's
//               send buffers into the receive vectors (no staging copy).
//   AllGatherV  the counts with a Gloo allgather, then the same pairwise
//               exchange with the one input sent to every peer.
//   Barrier     ProcessGroupGloo::barrier.
//
// Every c10d operation runs under options.timeout_ms (Gloo's context timeout
// and the store's). Exceptions from LibTorch or Gloo (c10::Error,
// gloo::IoException, std::exception) never leave this adapter: they become
// a Status. A timeout becomes DeadlineExceeded, a peer that went away or
// refused a connection Unavailable, anything else Internal; the message
// carries the c10d text. After any error the transport is unusable and
// every further collective returns that error again.
//
// The rendezvous uses a c10d TCPStore at host:port. Either rank 0 hosts it
// (the default, as torch.distributed's env:// does), or it is hosted
// elsewhere: by torchrun's agent (TORCHELASTIC_USE_AGENT_STORE=True) or by a
// C10dStoreServer (tests, benchmarks: port 0 picks a free port, so nothing
// races for one). All keys of one transport live under options.prefix, so
// several transports may share one store if their prefixes differ.
//
// Ownership: a C10dTransport owns its store client, its process group and
// the KeyValueStore view kv() returns (valid for the transport's life).
//
// Thread-safety: as for Transport, one thread at a time. One other thread
// may use kv() while collectives run (the process group touches the store
// only while connecting). No LibTorch header is included here: the process
// group lives behind a pimpl.

#ifndef HY_RESHARD_C10D_TRANSPORT_H_
#define HY_RESHARD_C10D_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/result.h"
#include "hy/reshard/transport.h"

namespace hy::reshard {

struct C10dTransportOptions {
  // Limit for every c10d operation: the rendezvous, each collective, each
  // store access. c10d retries a refused store connection about once a
  // second, so a limit under ~2 s may fail to connect at all.
  int64_t timeout_ms = 300000;
  // Namespace of this transport's keys in the store.
  std::string prefix = "hy/reshard";
  // true: rank 0 starts the TCPStore server at port; false: every rank is
  // a client of a store someone else hosts.
  bool rank0_hosts_store = true;
  // The address Gloo binds for its connections. Empty: the interface
  // GLOO_SOCKET_IFNAME names if set, else this host's name resolved (as
  // c10d does by default, falling back to the loopback address).
  std::string gloo_hostname;
  // true: the store outlives the ranks and may hold keys of ranks that came
  // before (torchrun >= 2.4 keeps one store for every rendezvous round, so
  // a new round would read the dead round's Gloo addresses). The ranks
  // first agree, through the store, on an epoch no earlier group under
  // this prefix used, and put every key under prefix + "/e<epoch>".
  // FromEnv sets it when TORCHELASTIC_USE_AGENT_STORE is "True".
  bool fresh_namespace = false;
};

class C10dTransport : public Transport {
 public:
  // Connects rank `rank` of `world_size` to the store at host:port and
  // builds the Gloo process group; collective over all ranks (each blocks
  // until all have arrived or the timeout passes). Returns InvalidArgument
  // for a rank outside [0, world_size), world_size < 1, an empty host, a
  // port outside [1, 65535] or timeout_ms < 1; DeadlineExceeded if the
  // store or the other ranks do not answer in time; Unavailable if the
  // store's port cannot be bound or a peer drops its connection. Sets
  // SIGPIPE to ignored in this process if it had the default action (a
  // peer that is gone must be an error here, not the end of the process).
  static Result<std::unique_ptr<C10dTransport>> Connect(
      int rank, int world_size, const std::string& host, int port,
      const C10dTransportOptions& options = C10dTransportOptions());

  // As Connect, with torchrun's environment: RANK, WORLD_SIZE, MASTER_ADDR,
  // MASTER_PORT (required), LOCAL_RANK (optional; checked if set). When
  // TORCHELASTIC_USE_AGENT_STORE is "True" the store is the agent's and no
  // rank hosts one (overrides options.rank0_hosts_store). Returns
  // InvalidArgument naming the variable for one that is missing, not a
  // decimal integer, or out of range (RANK >= WORLD_SIZE, LOCAL_RANK >
  // RANK, MASTER_PORT not in [1, 65535]); otherwise as Connect.
  static Result<std::unique_ptr<C10dTransport>> FromEnv(
      const C10dTransportOptions& options = C10dTransportOptions());

  ~C10dTransport() override;
  C10dTransport(const C10dTransport&) = delete;
  C10dTransport& operator=(const C10dTransport&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  const char* name() const override { return "gloo"; }
  // LOCAL_RANK for FromEnv; rank() otherwise.
  int local_rank() const { return local_rank_; }
  // Where this transport's keys live in the store: options.prefix, plus
  // the agreed epoch under fresh_namespace. Other groups over the same
  // store (the trainer's TP groups) put their keys under it too.
  const std::string& key_prefix() const { return key_prefix_; }

  // As Transport says. AllToAllV returns InvalidArgument, and the transport
  // stays usable, if send.size() != world_size().
  Status AllToAllV(const std::vector<ConstBytes>& send,
                   std::vector<std::vector<uint8_t>>* recv) override;
  Status AllGatherV(ConstBytes in,
                    std::vector<std::vector<uint8_t>>* out) override;
  // Receives in place. The sizes are still exchanged (Gloo aborts the
  // process on a message larger than its receive): a rank that sent
  // another size than expected makes this call Internal on the ranks that
  // expected otherwise, and the transport stays usable.
  Status AllGatherInto(ConstBytes in,
                       const std::vector<MutableBytes>& out) override;
  Status Barrier() override;

  // ProcessGroupGloo::allgather as is, for equal contributions: out receives
  // world_size() * in.size() bytes, rank p's at p * in.size(). The peer
  // baseline of the reshard benchmark. Returns InvalidArgument if out.size()
  // is not world_size() * in.size(); errors as the collectives above.
  Status AllGatherEqual(ConstBytes in, MutableBytes out);

  // The store this transport rendezvoused through, under
  // options.prefix + "/kv/". Set overwrites; Get waits up to timeout_ms.
  KeyValueStore* kv();

 private:
  struct Impl;
  C10dTransport(int rank, int world_size, std::unique_ptr<Impl> impl);

  const int rank_;
  const int world_size_;
  int local_rank_;
  std::string key_prefix_;
  std::unique_ptr<Impl> impl_;
};

// The Status for the LibTorch / Gloo exception being handled, mapped as this
// adapter maps its own (timeouts DeadlineExceeded, lost peers Unavailable,
// the rest Internal), with `op` leading the message. For other LibTorch
// adapters (the trainer's). REQUIRES: called inside a catch block.
Status CurrentC10dExceptionStatus(std::string_view op);

// A TCPStore server owned by a process that is not a rank (a launcher, a
// test, a benchmark); ranks connect with rank0_hosts_store = false. Port 0
// binds a free port; port() says which. The server runs until destroyed.
// Thread-safety: port() from any thread; kv() from one thread at a time.
class C10dStoreServer {
 public:
  // Returns InvalidArgument for a port outside [0, 65535] or timeout_ms <
  // 1, Unavailable if the port cannot be bound, DeadlineExceeded if the
  // server's own client cannot reach it in time.
  static Result<std::unique_ptr<C10dStoreServer>> Start(
      int port = 0, int64_t timeout_ms = 300000);
  ~C10dStoreServer();
  C10dStoreServer(const C10dStoreServer&) = delete;
  C10dStoreServer& operator=(const C10dStoreServer&) = delete;

  int port() const;
  // The whole store, no prefix.
  KeyValueStore* kv();

 private:
  struct Impl;
  explicit C10dStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hy::reshard

#endif  // HY_RESHARD_C10D_TRANSPORT_H_
