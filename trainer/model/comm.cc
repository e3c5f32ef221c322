#include "hy/trainer/model/comm.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "hy/common/gpu.h"
#include "hy/reshard/nccl_executor.h"

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

namespace {

// The GPU this rank trains on: LOCAL_RANK mod the visible GPUs (the
// launcher and torchrun start one process per GPU of a host).
Result<at::Device> CudaDeviceOfThisRank() {
  if (!at::hasCUDA()) {
    return Status::InvalidArgument(
        "trainer.device cuda: the LibTorch this hyctl runs on has no CUDA "
        "(a CPU build of torch); install a CUDA build of torch and rebuild");
  }
  const int gpus = GpuDeviceCount();
  if (gpus == 0) {
    return Status::InvalidArgument(
        "trainer.device cuda: no CUDA device is visible");
  }
  const char* local = std::getenv("LOCAL_RANK");
  const int local_rank = local != nullptr ? std::atoi(local) : 0;
  return at::Device(at::kCUDA,
                    static_cast<c10::DeviceIndex>(local_rank % gpus));
}

}  // namespace

Result<std::unique_ptr<Comm>> Comm::FromEnv(const CommOptions& o) {
  const int tp_size = o.tp_size;
  const int64_t timeout_ms = o.timeout_ms;
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
  comm->equal_size_ = o.equal_size_collectives;
  if (o.device == Device::kCuda) {
    HY_ASSIGN_OR_RETURN(comm->device_, CudaDeviceOfThisRank());
    comm->equal_size_ = true;
    HY_RETURN_IF_ERROR(comm->ConnectNccl(timeout_ms));
    return comm;
  }
  if (tp_size > 1) {
    HY_RETURN_IF_ERROR(
        comm->ConnectGlooTp(addr, options.gloo_hostname, timeout_ms));
  }
  return comm;
}

Status Comm::ConnectNccl(int64_t timeout_ms) {
  const int world = transport_->world_size();
  reshard::NcclCommOptions nccl;
  nccl.device = device_.index();
  nccl.timeout_ms = timeout_ms;
  nccl.store_key = transport_->key_prefix() + "/nccl/world";
  Result<std::shared_ptr<reshard::NcclCommunicator>> world_comm =
      reshard::NcclCommunicator::Create(rank(), world, transport_->kv(), nccl);
  if (!world_comm.ok()) {
    return world_comm.status().WithContext("trainer NCCL communicator");
  }
  nccl_ = std::move(world_comm).value();
  if (tp_size_ > 1) {
    nccl.store_key = transport_->key_prefix() + "/nccl/tp/" +
                     std::to_string(rank() / tp_size_);
    Result<std::shared_ptr<reshard::NcclCommunicator>> tp_comm =
        reshard::NcclCommunicator::Create(rank() % tp_size_, tp_size_,
                                          transport_->kv(), nccl);
    if (!tp_comm.ok()) {
      return tp_comm.status().WithContext("trainer NCCL TP communicator");
    }
    nccl_tp_ = std::move(tp_comm).value();
  }
  return Status::OK();
}

Status Comm::ConnectGlooTp(const char* addr, const std::string& gloo_hostname,
                           int64_t timeout_ms) {
  auto group = std::make_unique<TpGroup>();
  const auto timeout = std::chrono::milliseconds(timeout_ms);
  const int world_rank = rank();
  const int tp_size = tp_size_;
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
        gloo_hostname.empty()
            ? c10d::ProcessGroupGloo::createDefaultDevice()
            : c10d::ProcessGroupGloo::createDeviceForHostname(gloo_hostname));
    pg_options->threads = 1;
    group->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>(
            transport_->key_prefix() + "/tp/" +
                std::to_string(world_rank / tp_size),
            group->store),
        world_rank % tp_size, tp_size, pg_options);
  }));
  tp_ = std::move(group);
  return Status::OK();
}

Comm::~Comm() = default;

at::TensorOptions Comm::f32() const {
  return at::TensorOptions().dtype(at::kFloat).device(device_);
}

Status Comm::TpAllReduce(at::Tensor* t) {
  if (tp_size_ == 1) return Status::OK();
  if (nccl_tp_ != nullptr) {
    return nccl_tp_->AllReduceSum(t->data_ptr<float>(),
                                  static_cast<size_t>(t->numel()));
  }
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
  at::Tensor in = t.contiguous();
  if (nccl_tp_ != nullptr) {
    std::vector<int64_t> shape = {tp_size_};
    for (int64_t s : in.sizes()) shape.push_back(s);
    at::Tensor all = at::empty(shape, in.options());
    HY_RETURN_IF_ERROR(nccl_tp_->AllGather(in.data_ptr<float>(),
                                           all.data_ptr<float>(),
                                           static_cast<size_t>(in.numel())));
    return at::cat(all.unbind(0), dim);
  }
  if (tp_->broken) return Status::Unavailable("tp group failed earlier");
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
  return AllGatherEqual(shard, full);
}

Status Comm::AllGatherEqual(const at::Tensor& send, at::Tensor* out) {
  const at::Tensor in = send.contiguous();
  *out = at::empty({in.numel() * world_size()}, in.options());
  if (nccl_ != nullptr) {
    return nccl_->AllGather(in.data_ptr<float>(), out->data_ptr<float>(),
                            static_cast<size_t>(in.numel()));
  }
  const int64_t bytes = in.numel() * 4;
  return transport_->AllGatherEqual(
      ConstBytes(static_cast<const uint8_t*>(in.data_ptr()),
                 static_cast<size_t>(bytes)),
      MutableBytes(static_cast<uint8_t*>(out->data_ptr()),
                   static_cast<size_t>(bytes * world_size())));
}

Result<at::Tensor> Comm::ReduceScatterSum(const at::Tensor& full) {
  const int world = world_size();
  const int64_t piece = full.numel() / world;
  at::Tensor f = full.contiguous();
  if (nccl_ != nullptr) {
    at::Tensor sum = at::empty({piece}, f.options());
    HY_RETURN_IF_ERROR(nccl_->ReduceScatterSum(f.data_ptr<float>(),
                                               sum.data_ptr<float>(),
                                               static_cast<size_t>(piece)));
    return sum;
  }
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
