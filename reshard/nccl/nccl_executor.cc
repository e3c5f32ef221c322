// NcclExecutor (builds with NCCL). Two streams per executor: `pack` runs the
// local copies and packs step j + 1 into one send buffer while `comm`
// exchanges step j from the other and then unpacks it. Events order the two
// (comm waits for the pack of its step; pack waits for the exchange that
// last read the send buffer it is about to overwrite) and time the phases.

#include "hy/reshard/nccl_executor.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "checks.h"
#include "copy_ops.h"
#include "cuda_util.h"
#include "hy/common/dtype.h"
#include "schedule.h"

namespace hy::reshard {

using nccl_internal::CopyOp;
using nccl_internal::CudaStatus;
using nccl_internal::DeviceGuard;
using nccl_internal::LaunchCopyOps;
using nccl_internal::NcclStatus;
using nccl_internal::Schedule;
using nccl_internal::StepWork;

namespace {

// Event slots: a few per run, then kPerStep per step.
enum RunEvent { kStart, kReady, kLocal0, kLocal1, kPackEnd, kDone, kRunEvents };
enum StepEvent { kPack0, kPack1, kXfer0, kXfer1, kUnpack1, kPerStep };

#define HY_CUDA_RETURN_IF_ERROR(what, expr)                             \
  do {                                                                  \
    const cudaError_t hy_cuda_e_ = (expr);                              \
    if (hy_cuda_e_ != cudaSuccess) return CudaStatus(what, hy_cuda_e_); \
  } while (0)

double Seconds(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return ms / 1e3;
}

Status CheckDevicePointer(const void* p, const char* which, size_t t,
                          int device) {
  cudaPointerAttributes attr;
  const cudaError_t e = cudaPointerGetAttributes(&attr, p);
  const std::string name = std::string(which) + "[" + std::to_string(t) + "]";
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::InvalidArgument(
        "NcclExecutor: " + name +
        " is not a CUDA pointer: " + cudaGetErrorString(e));
  }
  if (attr.type == cudaMemoryTypeUnregistered) {
    return Status::InvalidArgument("NcclExecutor: " + name +
                                   " is host memory, not device memory");
  }
  if (attr.type == cudaMemoryTypeDevice && attr.device != device) {
    return Status::InvalidArgument("NcclExecutor: " + name + " is on device " +
                                   std::to_string(attr.device) +
                                   ", the communicator on device " +
                                   std::to_string(device));
  }
  return Status::OK();
}

}  // namespace

struct NcclExecutor::Impl {
  std::shared_ptr<NcclCommunicator> comm;  // Destroyed last.
  NcclExecutorOptions options;
  Schedule schedule;  // Its ops live on the device only.
  int64_t num_ops = 0;
  std::vector<size_t> src_bytes;  // Expected buffer sizes per tensor.
  std::vector<size_t> dst_bytes;
  std::vector<const uint8_t*> host_tables;  // Source bases, then dst bases.

  DeviceBuffer ops;
  DeviceBuffer tables;
  DeviceBuffer send[2];
  DeviceBuffer recv;
  cudaStream_t pack = nullptr;
  cudaStream_t xfer = nullptr;
  std::vector<cudaEvent_t> events;

  ~Impl() {
    DeviceGuard guard;
    (void)guard.Set(comm->device());
    for (cudaEvent_t e : events) (void)cudaEventDestroy(e);
    if (pack != nullptr) (void)cudaStreamDestroy(pack);
    if (xfer != nullptr) (void)cudaStreamDestroy(xfer);
  }

  cudaEvent_t RunEv(RunEvent e) const { return events[e]; }
  cudaEvent_t StepEv(size_t j, StepEvent e) const {
    return events[kRunEvents + j * kPerStep + e];
  }
  const CopyOp* Ops(int64_t first) const {
    return reinterpret_cast<const CopyOp*>(ops.data()) + first;
  }
  Status Launch(int64_t begin, int64_t end, const uint8_t* src_bucket,
                uint8_t* dst_bucket, cudaStream_t stream) const {
    if (begin == end) return Status::OK();
    auto* bases = reinterpret_cast<uint8_t* const*>(tables.data());
    return LaunchCopyOps(Ops(begin), end - begin, bases,
                         bases + src_bytes.size(), src_bucket, dst_bucket,
                         stream);
  }

  Status Init();
  Status CheckBuffers(const std::vector<ConstBytes>& src,
                      const std::vector<MutableBytes>& dst) const;
  Status Enqueue();
  Status Exchange(const StepWork& w, const uint8_t* send_buf);
  Status WaitDone();
  void FillStats(const TransferPlan& plan, ReshardStats* stats) const;
};

Status NcclExecutor::Impl::Init() {
  const int device = comm->device();
  DeviceGuard guard;
  HY_RETURN_IF_ERROR(guard.Set(device));
  HY_CUDA_RETURN_IF_ERROR(
      "cudaStreamCreate",
      cudaStreamCreateWithFlags(&pack, cudaStreamNonBlocking));
  HY_CUDA_RETURN_IF_ERROR(
      "cudaStreamCreate",
      cudaStreamCreateWithFlags(&xfer, cudaStreamNonBlocking));
  const size_t num_events = kRunEvents + kPerStep * schedule.steps.size();
  events.reserve(num_events);
  while (events.size() < num_events) {
    cudaEvent_t e = nullptr;
    HY_CUDA_RETURN_IF_ERROR("cudaEventCreate", cudaEventCreate(&e));
    events.push_back(e);
  }
  num_ops = static_cast<int64_t>(schedule.ops.size());
  HY_ASSIGN_OR_RETURN(ops,
                      DeviceBuffer::Allocate(device, num_ops * sizeof(CopyOp)));
  HY_RETURN_IF_ERROR(ops.CopyFromHost(
      ConstBytes(schedule.ops.data(), schedule.ops.size() * sizeof(CopyOp))));
  std::vector<CopyOp>().swap(schedule.ops);
  host_tables.assign(2 * src_bytes.size(), nullptr);
  HY_ASSIGN_OR_RETURN(tables, DeviceBuffer::Allocate(
                                  device, host_tables.size() * sizeof(void*)));
  const size_t send_bytes = static_cast<size_t>(schedule.max_send_bytes);
  HY_ASSIGN_OR_RETURN(send[0], DeviceBuffer::Allocate(device, send_bytes));
  if (schedule.steps.size() > 1) {
    HY_ASSIGN_OR_RETURN(send[1], DeviceBuffer::Allocate(device, send_bytes));
  }
  HY_ASSIGN_OR_RETURN(
      recv, DeviceBuffer::Allocate(
                device, static_cast<size_t>(schedule.max_recv_bytes)));
  return Status::OK();
}

Status NcclExecutor::Impl::CheckBuffers(
    const std::vector<ConstBytes>& src,
    const std::vector<MutableBytes>& dst) const {
  const size_t n = src_bytes.size();
  if (src.size() != n || dst.size() != n) {
    return Status::InvalidArgument(
        "NcclExecutor: " + std::to_string(src.size()) + " source and " +
        std::to_string(dst.size()) + " destination buffers for a plan of " +
        std::to_string(n) + " tensors");
  }
  for (size_t t = 0; t < n; ++t) {
    if (src[t].size() != src_bytes[t] || dst[t].size() != dst_bytes[t]) {
      return Status::InvalidArgument(
          "NcclExecutor: tensor " + std::to_string(t) + " buffers hold " +
          std::to_string(src[t].size()) + " / " +
          std::to_string(dst[t].size()) + " bytes, the plan says " +
          std::to_string(src_bytes[t]) + " / " + std::to_string(dst_bytes[t]));
    }
    if (!src[t].empty()) {
      HY_RETURN_IF_ERROR(
          CheckDevicePointer(src[t].data(), "src", t, comm->device()));
    }
    if (!dst[t].empty()) {
      HY_RETURN_IF_ERROR(
          CheckDevicePointer(dst[t].data(), "dst", t, comm->device()));
    }
  }
  return Status::OK();
}

Status NcclExecutor::Impl::Exchange(const StepWork& w,
                                    const uint8_t* send_buf) {
  NcclCommunicator::Impl& c = *comm->impl_;
  ncclResult_t r = ncclGroupStart();
  for (const auto& b : w.sends) {
    if (r != ncclSuccess && r != ncclInProgress) break;
    r = ncclSend(send_buf + b.offset, static_cast<size_t>(b.bytes), ncclUint8,
                 b.peer, c.comm, xfer);
  }
  for (const auto& b : w.recvs) {
    if (r != ncclSuccess && r != ncclInProgress) break;
    r = ncclRecv(recv.data() + b.offset, static_cast<size_t>(b.bytes),
                 ncclUint8, b.peer, c.comm, xfer);
  }
  const ncclResult_t end = ncclGroupEnd();
  if (r != ncclSuccess && r != ncclInProgress) {
    return c.Check("ncclSend/ncclRecv of step " + std::to_string(w.step), r);
  }
  return c.Check("ncclGroupEnd of step " + std::to_string(w.step), end);
}

Status NcclExecutor::Impl::Enqueue() {
  const auto user = static_cast<cudaStream_t>(options.stream);
  HY_CUDA_RETURN_IF_ERROR("cudaEventRecord",
                          cudaEventRecord(RunEv(kStart), user));
  HY_CUDA_RETURN_IF_ERROR("cudaStreamWaitEvent",
                          cudaStreamWaitEvent(pack, RunEv(kStart), 0));
  if (tables.size() > 0) {
    HY_CUDA_RETURN_IF_ERROR(
        "cudaMemcpyAsync",
        cudaMemcpyAsync(tables.data(), host_tables.data(), tables.size(),
                        cudaMemcpyHostToDevice, pack));
  }
  HY_CUDA_RETURN_IF_ERROR("cudaEventRecord",
                          cudaEventRecord(RunEv(kReady), pack));
  HY_CUDA_RETURN_IF_ERROR("cudaStreamWaitEvent",
                          cudaStreamWaitEvent(xfer, RunEv(kReady), 0));

  HY_CUDA_RETURN_IF_ERROR("cudaEventRecord",
                          cudaEventRecord(RunEv(kLocal0), pack));
  HY_RETURN_IF_ERROR(Launch(0, schedule.local_end, nullptr, nullptr, pack));
  HY_CUDA_RETURN_IF_ERROR("cudaEventRecord",
                          cudaEventRecord(RunEv(kLocal1), pack));

  for (size_t j = 0; j < schedule.steps.size(); ++j) {
    const StepWork& w = schedule.steps[j];
    uint8_t* send_buf = send[j % 2].data();
    if (j >= 2) {
      HY_CUDA_RETURN_IF_ERROR(
          "cudaStreamWaitEvent",
          cudaStreamWaitEvent(pack, StepEv(j - 2, kXfer1), 0));
    }
    HY_CUDA_RETURN_IF_ERROR("cudaEventRecord",
                            cudaEventRecord(StepEv(j, kPack0), pack));
    HY_RETURN_IF_ERROR(
        Launch(w.pack_begin, w.pack_end, nullptr, send_buf, pack));
    HY_CUDA_RETURN_IF_ERROR("cudaEventRecord",
                            cudaEventRecord(StepEv(j, kPack1), pack));
    HY_CUDA_RETURN_IF_ERROR("cudaStreamWaitEvent",
                            cudaStreamWaitEvent(xfer, StepEv(j, kPack1), 0));
    HY_CUDA_RETURN_IF_ERROR("cudaEventRecord",
                            cudaEventRecord(StepEv(j, kXfer0), xfer));
    HY_RETURN_IF_ERROR(Exchange(w, send_buf));
    HY_CUDA_RETURN_IF_ERROR("cudaEventRecord",
                            cudaEventRecord(StepEv(j, kXfer1), xfer));
    HY_RETURN_IF_ERROR(
        Launch(w.unpack_begin, w.unpack_end, recv.data(), nullptr, xfer));
    HY_CUDA_RETURN_IF_ERROR("cudaEventRecord",
                            cudaEventRecord(StepEv(j, kUnpack1), xfer));
  }

  HY_CUDA_RETURN_IF_ERROR("cudaEventRecord",
                          cudaEventRecord(RunEv(kPackEnd), pack));
  HY_CUDA_RETURN_IF_ERROR("cudaStreamWaitEvent",
                          cudaStreamWaitEvent(xfer, RunEv(kPackEnd), 0));
  HY_CUDA_RETURN_IF_ERROR("cudaEventRecord",
                          cudaEventRecord(RunEv(kDone), xfer));
  HY_CUDA_RETURN_IF_ERROR("cudaStreamWaitEvent",
                          cudaStreamWaitEvent(user, RunEv(kDone), 0));
  return Status::OK();
}

Status NcclExecutor::Impl::WaitDone() {
  // The communicator's wait: the event, NCCL's asynchronous error and the
  // timeout (aborting on either; Run aborts again, which is a no-op).
  return comm->impl_->WaitEvent(RunEv(kDone), "NcclExecutor::Run");
}

void NcclExecutor::Impl::FillStats(const TransferPlan& plan,
                                   ReshardStats* stats) const {
  ReshardStats s;
  s.plan_seconds = plan.stats.plan_seconds;
  s.unpack_seconds = Seconds(RunEv(kLocal0), RunEv(kLocal1));
  for (size_t j = 0; j < schedule.steps.size(); ++j) {
    s.pack_seconds += Seconds(StepEv(j, kPack0), StepEv(j, kPack1));
    s.transfer_seconds += Seconds(StepEv(j, kXfer0), StepEv(j, kXfer1));
    s.unpack_seconds += Seconds(StepEv(j, kXfer1), StepEv(j, kUnpack1));
  }
  s.local_bytes = schedule.local_bytes;
  s.same_node_bytes = schedule.same_node_bytes;
  s.cross_node_bytes = schedule.cross_node_bytes;
  s.wire_bytes_sent = schedule.wire_bytes_sent;
  // The schedule counts wire-dtype bytes; NCCL runs send them densely.
  s.logical_bytes_sent = schedule.same_node_bytes + schedule.cross_node_bytes;
  s.wire_bytes_received = schedule.wire_bytes_received;
  s.steps = static_cast<int>(plan.steps.size());
  *stats = s;
}

// ---- NcclExecutor -----------------------------------------------------------

NcclExecutor::NcclExecutor(std::shared_ptr<const TransferPlan> plan,
                           std::unique_ptr<Impl> impl)
    : plan_(std::move(plan)), impl_(std::move(impl)) {}

NcclExecutor::~NcclExecutor() = default;

Result<std::unique_ptr<NcclExecutor>> NcclExecutor::Create(
    std::shared_ptr<const TransferPlan> plan,
    std::shared_ptr<NcclCommunicator> comm,
    const NcclExecutorOptions& options) {
  HY_RETURN_IF_ERROR(
      nccl_internal::CheckExecutorArgs(plan.get(), comm.get(), options));
  if (comm->aborted()) {
    return Status::FailedPrecondition(
        "NcclExecutor: the communicator was aborted");
  }
  if (comm->world_size() != plan->topology.world_size) {
    return Status::InvalidArgument(
        "NcclExecutor: communicator of " + std::to_string(comm->world_size()) +
        " ranks for a plan of " + std::to_string(plan->topology.world_size));
  }
  HY_ASSIGN_OR_RETURN(
      Schedule schedule,
      nccl_internal::BuildSchedule(*plan, comm->rank(), options.wire));
  auto impl = std::make_unique<Impl>();
  impl->comm = std::move(comm);
  impl->options = options;
  impl->schedule = std::move(schedule);
  const int rank = impl->comm->rank();
  for (size_t t = 0; t < plan->spec.tensors.size(); ++t) {
    const DType dtype = plan->spec.tensors[t].meta.dtype;
    const RankShard& src = plan->src.Get(rank, static_cast<int>(t));
    const RankShard& dst = plan->dst.Get(rank, static_cast<int>(t));
    impl->src_bytes.push_back(
        static_cast<size_t>(src.has_shard ? src.num_elements : 0) *
        DTypeSize(dtype));
    impl->dst_bytes.push_back(
        static_cast<size_t>(dst.has_shard ? dst.num_elements : 0) *
        DTypeSize(WireDType(dtype, options.wire)));
  }
  HY_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<NcclExecutor>(
      new NcclExecutor(std::move(plan), std::move(impl)));
}

int64_t NcclExecutor::staging_bytes() const {
  return static_cast<int64_t>(impl_->ops.size() + impl_->tables.size() +
                              impl_->send[0].size() + impl_->send[1].size() +
                              impl_->recv.size());
}

Status NcclExecutor::Run(const std::vector<ConstBytes>& src,
                         const std::vector<MutableBytes>& dst,
                         ReshardStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  Impl& m = *impl_;
  if (m.comm->aborted()) {
    return Status::FailedPrecondition(
        "NcclExecutor: the communicator was aborted by an earlier error");
  }
  DeviceGuard guard;
  HY_RETURN_IF_ERROR(guard.Set(m.comm->device()));
  HY_RETURN_IF_ERROR(m.CheckBuffers(src, dst));
  const size_t n = src.size();
  for (size_t t = 0; t < n; ++t) {
    m.host_tables[t] = src[t].data();
    m.host_tables[n + t] = dst[t].data();
  }
  Status status = m.Enqueue();
  if (status.ok()) status = m.WaitDone();
  if (!status.ok()) {
    // Peers may wait on this rank forever: abort, then let what was queued
    // drain (NCCL's kernels exit once aborted).
    m.comm->impl_->Abort();
    (void)cudaStreamSynchronize(m.pack);
    (void)cudaStreamSynchronize(m.xfer);
    (void)cudaGetLastError();
    return status;
  }
  ReshardStats s;
  m.FillStats(*plan_, &s);
  s.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (m.options.metrics != nullptr) {
    RecordReshardMetrics(*m.options.metrics, s, m.options.direction, "nccl",
                         m.options.wire, /*sparse_delta=*/false);
  }
  if (stats != nullptr) *stats = s;
  return Status::OK();
}

}  // namespace hy::reshard
