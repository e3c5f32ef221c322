// C10dTransport and C10dStoreServer over LibTorch's c10d (see
// c10d_transport.h). With c10d_epoch.cc (the fresh-namespace handshake) the
// only reshard sources that include LibTorch headers; this one includes the
// narrowest it can, which still take ~20 s to compile.

#include "hy/reshard/c10d_transport.h"

#include "c10d_epoch.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/exception.h>

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

namespace hy::reshard {
namespace {

// A write to the socket of a peer that is gone raises SIGPIPE, whose
// default action ends the process (exit 141) before Gloo or the store can
// report anything. Ignored, the write fails with EPIPE, which they report
// as an error. A handler someone else installed is left alone.
void IgnoreSigpipe() {
  struct sigaction old;
  if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

using Millis = std::chrono::milliseconds;

bool Contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

// Maps an error message to a Status: timeouts, lost or refused connections
// and everything else (`fallback`).
Status Classify(std::string_view op, const std::string& message,
                StatusCode fallback) {
  std::string lower = message;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  const std::string text = std::string(op) + ": " + message;
  if (Contains(lower, "timed out") || Contains(lower, "timeout")) {
    return Status::DeadlineExceeded(text);
  }
  if (Contains(lower, "connection") || Contains(lower, "closed") ||
      Contains(lower, "refused") || Contains(lower, "reset by peer") ||
      Contains(lower, "broken pipe") || Contains(lower, "address")) {
    return Status::Unavailable(text);
  }
  return Status(fallback, text);
}

// The Status for the exception being handled. Call only inside a catch.
Status CurrentExceptionStatus(std::string_view op) {
  try {
    throw;
  } catch (const c10d::TimeoutError& e) {
    return Status::DeadlineExceeded(std::string(op) + ": " + e.what());
  } catch (const gloo::IoException& e) {
    return Classify(op, e.what(), StatusCode::kUnavailable);
  } catch (const c10::DistError& e) {  // Store, network, backend errors.
    return Classify(op, e.what_without_backtrace(), StatusCode::kUnavailable);
  } catch (const c10::Error& e) {
    return Classify(op, e.what_without_backtrace(), StatusCode::kInternal);
  } catch (const std::exception& e) {
    return Classify(op, e.what(), StatusCode::kInternal);
  } catch (...) {
    return Status::Internal(std::string(op) + ": unknown exception");
  }
}

// A uint8 tensor over caller memory. Gloo only reads a send buffer, so the
// const_cast is never written through.
at::Tensor ByteView(const void* data, int64_t size) {
  return at::from_blob(const_cast<void*>(data), {size},
                       at::TensorOptions().dtype(at::kByte));
}

std::shared_ptr<gloo::transport::Device> CreateDevice(
    const std::string& hostname) {
  if (!hostname.empty()) {
    return c10d::ProcessGroupGloo::createDeviceForHostname(hostname);
  }
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname != nullptr && *ifname != '\0') {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// KeyValueStore over a c10d store (usually a PrefixStore on a TCPStore).
class StoreKv : public KeyValueStore {
 public:
  StoreKv(c10::intrusive_ptr<c10d::Store> store, Millis timeout)
      : store_(std::move(store)), timeout_(timeout) {}

  Status Set(const std::string& key, const std::string& value) override {
    try {
      store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
      return Status::OK();
    } catch (...) {
      return CurrentExceptionStatus("store set '" + key + "'");
    }
  }

  Result<std::string> Get(const std::string& key) override {
    try {
      store_->wait({key}, timeout_);
      const std::vector<uint8_t> value = store_->get(key);
      return std::string(value.begin(), value.end());
    } catch (...) {
      return CurrentExceptionStatus("store get '" + key + "'");
    }
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  const Millis timeout_;
};

}  // namespace

struct C10dTransport::Impl {
  int rank = 0;
  int world_size = 1;
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::unique_ptr<StoreKv> kv;
  Status broken;     // The first error; every later collective returns it.
  int next_tag = 0;  // Point-to-point tags; advance alike on every rank.

  // Records the first error and returns it.
  Status Fail(Status status) {
    if (broken.ok()) broken = std::move(status);
    return broken;
  }

  // Waits for `work`; false from wait() means it was aborted.
  static void Wait(const c10::intrusive_ptr<c10d::Work>& work) {
    if (!work->wait()) throw std::runtime_error("c10d work aborted");
  }

  // One int64 per peer through alltoall_base: returns what each peer put in
  // its slot for this rank.
  Status ExchangeCounts(const std::vector<int64_t>& send_counts,
                        std::vector<int64_t>* recv_counts) {
    recv_counts->assign(world_size, 0);
    try {
      at::Tensor in =
          at::from_blob(const_cast<int64_t*>(send_counts.data()), {world_size},
                        at::TensorOptions().dtype(at::kLong));
      at::Tensor out = at::from_blob(recv_counts->data(), {world_size},
                                     at::TensorOptions().dtype(at::kLong));
      std::vector<int64_t> no_splits;
      Wait(pg->alltoall_base(out, in, no_splits, no_splits));
    } catch (...) {
      return Fail(CurrentExceptionStatus("gloo alltoall_base (counts)"));
    }
    for (int p = 0; p < world_size; ++p) {
      if ((*recv_counts)[p] < 0) {
        return Fail(Status::Internal("gloo: rank " + std::to_string(p) +
                                     " announced a negative size"));
      }
    }
    return Status::OK();
  }

  // Every rank's `mine` into (*sizes)[rank].
  Status AllGatherSizes(int64_t mine, std::vector<int64_t>* sizes) {
    sizes->assign(world_size, 0);
    try {
      std::vector<at::Tensor> input{
          at::from_blob(&mine, {1}, at::TensorOptions().dtype(at::kLong))};
      std::vector<std::vector<at::Tensor>> outputs(1);
      for (int p = 0; p < world_size; ++p) {
        outputs[0].push_back(at::from_blob(
            &(*sizes)[p], {1}, at::TensorOptions().dtype(at::kLong)));
      }
      Wait(pg->allgather(outputs, input));
    } catch (...) {
      return Fail(CurrentExceptionStatus("gloo allgather (sizes)"));
    }
    return Status::OK();
  }

  // Receives recv_sizes[p] bytes from every peer p into (*recv)[p] and
  // sends send[p] to every peer, posting all Gloo recvs and sends before
  // waiting for any. Empty messages are not sent at all.
  Status Exchange(const std::vector<ConstBytes>& send,
                  const std::vector<int64_t>& recv_sizes,
                  std::vector<std::vector<uint8_t>>* recv, const char* op) {
    recv->resize(world_size);
    std::vector<MutableBytes> into(world_size);
    for (int p = 0; p < world_size; ++p) {
      if (p == rank) {
        (*recv)[p].clear();
        continue;
      }
      // No clear() first: a buffer kept from an earlier exchange of the
      // same size is not zero-filled again before Gloo overwrites it.
      (*recv)[p].resize(static_cast<size_t>(recv_sizes[p]));
      into[p] = MutableBytes((*recv)[p].data(), (*recv)[p].size());
    }
    return ExchangeInto(send, into, op);
  }

  // Exchange with the receive buffers given: into[p].size() bytes from
  // every peer p straight into into[p] (a peer sending another size fails
  // the receive).
  Status ExchangeInto(const std::vector<ConstBytes>& send,
                      const std::vector<MutableBytes>& into, const char* op) {
    const int tag = next_tag;
    next_tag = (next_tag + 1) & 0x3FFFFFFF;
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    try {
      for (int p = 0; p < world_size; ++p) {
        if (p == rank || into[p].empty()) continue;
        std::vector<at::Tensor> t{
            ByteView(into[p].data(), static_cast<int64_t>(into[p].size()))};
        works.push_back(pg->recv(t, p, tag));
      }
      for (int p = 0; p < world_size; ++p) {
        if (p == rank || send[p].empty()) continue;
        std::vector<at::Tensor> t{
            ByteView(send[p].data(), static_cast<int64_t>(send[p].size()))};
        works.push_back(pg->send(t, p, tag));
      }
      for (const auto& work : works) Wait(work);
    } catch (...) {
      Status status = CurrentExceptionStatus(op);
      for (const auto& work : works) {
        try {
          work->abort();
        } catch (...) {  // Already failed; the first error is the story.
        }
      }
      works.clear();  // Release Gloo's buffers before the caller's memory.
      return Fail(std::move(status));
    }
    return Status::OK();
  }
};

C10dTransport::C10dTransport(int rank, int world_size,
                             std::unique_ptr<Impl> impl)
    : rank_(rank),
      world_size_(world_size),
      local_rank_(rank),
      impl_(std::move(impl)) {}

C10dTransport::~C10dTransport() = default;

Status CurrentC10dExceptionStatus(std::string_view op) {
  return CurrentExceptionStatus(op);
}

Result<std::unique_ptr<C10dTransport>> C10dTransport::Connect(
    int rank, int world_size, const std::string& host, int port,
    const C10dTransportOptions& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return Status::InvalidArgument(
        "c10d connect: rank " + std::to_string(rank) +
        " is not in [0, world_size) for world_size " +
        std::to_string(world_size));
  }
  if (host.empty() || port < 1 || port > 65535) {
    return Status::InvalidArgument("c10d connect: bad store address '" + host +
                                   ":" + std::to_string(port) + "'");
  }
  if (options.timeout_ms < 1) {
    return Status::InvalidArgument("c10d connect: timeout_ms must be >= 1");
  }
  IgnoreSigpipe();
  const Millis timeout(options.timeout_ms);
  auto impl = std::make_unique<Impl>();
  impl->rank = rank;
  impl->world_size = world_size;
  const std::string where = "c10d connect rank " + std::to_string(rank) +
                            " of " + std::to_string(world_size) + " to " +
                            host + ":" + std::to_string(port);
  std::string key_prefix;
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(port);
    store_options.isServer = options.rank0_hosts_store && rank == 0;
    store_options.waitWorkers = false;
    store_options.timeout = timeout;
    impl->store = c10::make_intrusive<c10d::TCPStore>(host, store_options);
    key_prefix = options.prefix;
    if (options.fresh_namespace && world_size > 1) {
      key_prefix += "/e" + std::to_string(c10d_internal::AgreeEpoch(
                               *impl->store, options.prefix + "/epochs", rank,
                               world_size, timeout));
    }
    impl->kv = std::make_unique<StoreKv>(
        c10::make_intrusive<c10d::PrefixStore>(key_prefix + "/kv", impl->store),
        timeout);
    auto pg_options = c10d::ProcessGroupGloo::Options::create(timeout);
    pg_options->devices.push_back(CreateDevice(options.gloo_hostname));
    pg_options->threads = 2;
    impl->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>(key_prefix + "/pg", impl->store),
        rank, world_size, pg_options);
  } catch (...) {
    return CurrentExceptionStatus(where);
  }
  std::unique_ptr<C10dTransport> transport(
      new C10dTransport(rank, world_size, std::move(impl)));
  transport->key_prefix_ = std::move(key_prefix);
  return transport;
}

Status C10dTransport::AllToAllV(const std::vector<ConstBytes>& send,
                                std::vector<std::vector<uint8_t>>* recv) {
  if (!impl_->broken.ok()) return impl_->broken;
  if (static_cast<int>(send.size()) != world_size_) {
    return Status::InvalidArgument("AllToAllV: " + std::to_string(send.size()) +
                                   " send buffers for world size " +
                                   std::to_string(world_size_));
  }
  std::vector<int64_t> send_counts(world_size_, 0);
  for (int p = 0; p < world_size_; ++p) {
    if (p != rank_) send_counts[p] = static_cast<int64_t>(send[p].size());
  }
  std::vector<int64_t> recv_counts;
  HY_RETURN_IF_ERROR(impl_->ExchangeCounts(send_counts, &recv_counts));
  std::vector<ConstBytes> to_send = send;
  to_send[rank_] = ConstBytes();
  return impl_->Exchange(to_send, recv_counts, recv, "gloo AllToAllV");
}

Status C10dTransport::AllGatherV(ConstBytes in,
                                 std::vector<std::vector<uint8_t>>* out) {
  if (!impl_->broken.ok()) return impl_->broken;
  std::vector<int64_t> sizes;
  HY_RETURN_IF_ERROR(impl_->AllGatherSizes(static_cast<int64_t>(in.size()),
                                           &sizes));
  std::vector<ConstBytes> send(world_size_, in);
  send[rank_] = ConstBytes();
  HY_RETURN_IF_ERROR(impl_->Exchange(send, sizes, out, "gloo AllGatherV"));
  (*out)[rank_].assign(in.data(), in.data() + in.size());
  return Status::OK();
}

Status C10dTransport::AllGatherInto(ConstBytes in,
                                    const std::vector<MutableBytes>& out) {
  if (!impl_->broken.ok()) return impl_->broken;
  if (static_cast<int>(out.size()) != world_size_) {
    return Status::InvalidArgument(
        "AllGatherInto: " + std::to_string(out.size()) +
        " outputs for world size " + std::to_string(world_size_));
  }
  // The sizes still go round (8 bytes a rank): Gloo aborts the process on
  // a message larger than the receive posted for it. A rank that expected
  // another size receives that message aside and reports it.
  std::vector<int64_t> sizes;
  HY_RETURN_IF_ERROR(impl_->AllGatherSizes(static_cast<int64_t>(in.size()),
                                           &sizes));
  std::vector<ConstBytes> send(world_size_, in);
  send[rank_] = ConstBytes();
  std::vector<MutableBytes> into = out;
  into[rank_] = MutableBytes();
  std::vector<std::vector<uint8_t>> aside(world_size_);
  int wrong = -1;
  for (int p = 0; p < world_size_; ++p) {
    if (p == rank_ || sizes[p] == static_cast<int64_t>(out[p].size())) continue;
    aside[p].resize(static_cast<size_t>(sizes[p]));
    into[p] = MutableBytes(aside[p]);
    if (wrong < 0) wrong = p;
  }
  HY_RETURN_IF_ERROR(impl_->ExchangeInto(send, into, "gloo AllGatherInto"));
  if (wrong >= 0) {
    return Status::Internal("AllGatherInto: rank " + std::to_string(wrong) +
                            " sent " + std::to_string(sizes[wrong]) +
                            " bytes, expected " +
                            std::to_string(out[wrong].size()));
  }
  return Status::OK();
}

Status C10dTransport::Barrier() {
  if (!impl_->broken.ok()) return impl_->broken;
  try {
    Impl::Wait(impl_->pg->barrier());
  } catch (...) {
    return impl_->Fail(CurrentExceptionStatus("gloo barrier"));
  }
  return Status::OK();
}

Status C10dTransport::AllGatherEqual(ConstBytes in, MutableBytes out) {
  if (!impl_->broken.ok()) return impl_->broken;
  const int64_t n = static_cast<int64_t>(in.size());
  if (static_cast<int64_t>(out.size()) != n * world_size_) {
    return Status::InvalidArgument("AllGatherEqual: output of " +
                                   std::to_string(out.size()) + " bytes for " +
                                   std::to_string(world_size_) + " inputs of " +
                                   std::to_string(n));
  }
  if (n == 0) return Status::OK();
  try {
    std::vector<at::Tensor> input{ByteView(in.data(), n)};
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int p = 0; p < world_size_; ++p) {
      outputs[0].push_back(ByteView(out.data() + p * n, n));
    }
    Impl::Wait(impl_->pg->allgather(outputs, input));
  } catch (...) {
    return impl_->Fail(CurrentExceptionStatus("gloo allgather"));
  }
  return Status::OK();
}

KeyValueStore* C10dTransport::kv() { return impl_->kv.get(); }

struct C10dStoreServer::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  std::unique_ptr<StoreKv> kv;
};

C10dStoreServer::C10dStoreServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

C10dStoreServer::~C10dStoreServer() = default;

Result<std::unique_ptr<C10dStoreServer>> C10dStoreServer::Start(
    int port, int64_t timeout_ms) {
  if (port < 0 || port > 65535 || timeout_ms < 1) {
    return Status::InvalidArgument("c10d store server: bad port " +
                                   std::to_string(port) + " or timeout");
  }
  auto impl = std::make_unique<Impl>();
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(port);
    options.isServer = true;
    options.waitWorkers = false;
    options.timeout = Millis(timeout_ms);
    impl->store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
    impl->kv = std::make_unique<StoreKv>(impl->store, Millis(timeout_ms));
  } catch (...) {
    return CurrentExceptionStatus("c10d store server on port " +
                                  std::to_string(port));
  }
  return std::unique_ptr<C10dStoreServer>(new C10dStoreServer(std::move(impl)));
}

int C10dStoreServer::port() const { return impl_->store->getPort(); }

KeyValueStore* C10dStoreServer::kv() { return impl_->kv.get(); }

}  // namespace hy::reshard
