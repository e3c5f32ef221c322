#include "hy/trainer/model/comm.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace hy::trainer {

struct Comm::TpGroup {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  bool broken = false;
};

namespace {

// Runs a c10d call, mapping exceptions to a Status.
template <typename F>
Status Guard(const char* op, F&& f) {
  try {
    f();
  } catch (...) {
    return reshard::CurrentC10dExceptionStatus(op);
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Comm>> Comm::FromEnv(int tp_size, int64_t timeout_ms) {
  reshard::C10dTransportOptions options;
  options.timeout_ms = timeout_ms;
  options.prefix = "hy/trainer/world";
  options.gloo_hostname = "127.0.0.1";
  const char* addr = std::getenv("MASTER_ADDR");
  if (addr != nullptr && std::strcmp(addr, "127.0.0.1") != 0 &&
      std::strcmp(addr, "localhost") != 0) {
    options.gloo_hostname.clear();  // Multi-host: c10d's default device.
  }
  HY_ASSIGN_OR_RETURN(auto transport, reshard::C10dTransport::FromEnv(options));
  const int world = transport->world_size();
  if (tp_size < 1 || world % tp_size != 0) {
    return Status::InvalidArgument(
        "rollout.tensor_model_parallel_size " + std::to_string(tp_size) +
        " does not divide the world size " + std::to_string(world));
  }
  std::unique_ptr<Comm> comm(new Comm());
  comm->transport_ = std::move(transport);
  options.prefix = "hy/trainer/aux";
  options.rank0_hosts_store = false;  // The world transport's store.
  HY_ASSIGN_OR_RETURN(comm->aux_, reshard::C10dTransport::FromEnv(options));
  comm->tp_size_ = tp_size;
  if (tp_size > 1) {
    auto group = std::make_unique<TpGroup>();
    const auto timeout = std::chrono::milliseconds(timeout_ms);
    const int rank = comm->rank();
    HY_RETURN_IF_ERROR(Guard("tp group connect", [&] {
      c10d::TCPStoreOptions store_options;
      store_options.port =
          static_cast<uint16_t>(std::atoi(std::getenv("MASTER_PORT")));
      store_options.isServer = false;
      store_options.waitWorkers = false;
      store_options.timeout = timeout;
      group->store = c10::make_intrusive<c10d::TCPStore>(
          std::string(addr == nullptr ? "127.0.0.1" : addr), store_options);
      auto pg_options = c10d::ProcessGroupGloo::Options::create(timeout);
      pg_options->devices.push_back(
          options.gloo_hostname.empty()
              ? c10d::ProcessGroupGloo::createDefaultDevice()
              : c10d::ProcessGroupGloo::createDeviceForHostname(
                    options.gloo_hostname));
      pg_options->threads = 1;
      group->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>(
              comm->transport_->key_prefix() + "/tp/" +
                  std::to_string(rank / tp_size),
              group->store),
          rank % tp_size, tp_size, pg_options);
    }));
    comm->tp_ = std::move(group);
  }
  return comm;
}

Comm::~Comm() = default;

Status Comm::TpAllReduce(at::Tensor* t) {
  if (tp_size_ == 1) return Status::OK();
  if (tp_->broken) return Status::Unavailable("tp group failed earlier");
  Status s = Guard("tp all-reduce", [&] {
    std::vector<at::Tensor> tensors = {*t};
    tp_->pg->allreduce(tensors)->wait();
  });
  if (!s.ok()) tp_->broken = true;
  return s;
}

Result<at::Tensor> Comm::TpAllGather(const at::Tensor& t, int64_t dim) {
  if (tp_size_ == 1) return t;
  if (tp_->broken) return Status::Unavailable("tp group failed earlier");
  at::Tensor in = t.contiguous();
  std::vector<std::vector<at::Tensor>> out(1);
  for (int i = 0; i < tp_size_; ++i) out[0].push_back(at::empty_like(in));
  std::vector<at::Tensor> inputs = {in};
  Status s =
      Guard("tp all-gather", [&] { tp_->pg->allgather(out, inputs)->wait(); });
  if (!s.ok()) {
    tp_->broken = true;
    return s;
  }
  return at::cat(out[0], dim);
}

Status Comm::AllGatherShards(const at::Tensor& shard, at::Tensor* full) {
  const int64_t bytes = shard.numel() * 4;
  *full = at::empty({shard.numel() * world_size()}, shard.options());
  return transport_->AllGatherEqual(
      ConstBytes(static_cast<const uint8_t*>(shard.data_ptr()),
                 static_cast<size_t>(bytes)),
      MutableBytes(static_cast<uint8_t*>(full->data_ptr()),
                   static_cast<size_t>(bytes * world_size())));
}

Result<at::Tensor> Comm::ReduceScatterSum(const at::Tensor& full) {
  const int world = world_size();
  const int64_t piece = full.numel() / world;
  at::Tensor f = full.contiguous();
  const auto* base = static_cast<const uint8_t*>(f.data_ptr());
  std::vector<ConstBytes> send(world);
  for (int p = 0; p < world; ++p) {
    send[p] = ConstBytes(base + p * piece * 4, static_cast<size_t>(piece * 4));
  }
  std::vector<std::vector<uint8_t>> recv;
  HY_RETURN_IF_ERROR(transport_->AllToAllV(send, &recv));
  at::Tensor sum = at::zeros({piece}, f.options());
  for (int p = 0; p < world; ++p) {
    if (p == rank()) {
      sum.add_(f.narrow(0, p * piece, piece));
      continue;
    }
    if (static_cast<int64_t>(recv[p].size()) != piece * 4) {
      return Status::Internal("reduce-scatter: rank " + std::to_string(p) +
                              " sent " + std::to_string(recv[p].size()) +
                              " bytes, expected " + std::to_string(piece * 4));
    }
    sum.add_(at::from_blob(recv[p].data(), {piece}, f.options()));
  }
  return sum;
}

Result<std::vector<double>> Comm::SumAcrossRanks(const std::vector<double>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(double));
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  HY_ASSIGN_OR_RETURN(auto all, AllGatherBytes(bytes));
  std::vector<double> sum(v.size(), 0.0);
  for (const auto& b : all) {
    if (b.size() != bytes.size()) {
      return Status::Internal("SumAcrossRanks: ranks disagree on the length");
    }
    for (size_t i = 0; i < v.size(); ++i) {
      double x;
      std::memcpy(&x, b.data() + i * sizeof(double), sizeof(double));
      sum[i] += x;
    }
  }
  return sum;
}

Result<std::vector<std::vector<uint8_t>>> Comm::AllGatherBytes(
    const std::vector<uint8_t>& bytes) {
  std::vector<std::vector<uint8_t>> out;
  HY_RETURN_IF_ERROR(
      transport_->AllGatherV(ConstBytes(bytes.data(), bytes.size()), &out));
  out[rank()] = bytes;
  return out;
}

}  // namespace hy::trainer
