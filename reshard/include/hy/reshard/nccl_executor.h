// NcclExecutor: runs a TransferPlan for one rank on device buffers, over
// NCCL. The device twin of hy::reshard::Executor (executor.h): the same
// plan, the same buffers per tensor and the same wire formats, but src and
// dst are GPU memory and nothing passes through the host.
//
//   HY_ASSIGN_OR_RETURN(auto comm, NcclCommunicator::Create(rank, world,
//                                                           store));
//   HY_ASSIGN_OR_RETURN(auto exec, NcclExecutor::Create(plan, comm, opts));
//   HY_RETURN_IF_ERROR(exec->Run(src, dst, &stats));  // Collective.
//
// Per run: the local copies (plan.local) run as device-to-device copy
// kernels; then, per plan step this rank takes part in, a kernel packs what
// it sends into one bucket per peer (casting f32 -> bf16 on the GPU for
// WireFormat::kBf16), ncclSend / ncclRecv in one group exchange the
// buckets, and a kernel unpacks what arrived. Bucket sizes follow from the
// plan on both sides, so no sizes are exchanged. Packing runs on its own
// stream, one step ahead of the exchange (double-buffered send buckets).
// Sparse delta is not supported on device buffers.
//
// Bucket layout (both ends compute it from the plan): per step, a rank's
// send buffer holds one bucket per destination in ascending rank order, and
// a bucket holds that pair's transfers in plan order, each in the wire dtype
// and starting at a multiple of 16 bytes (so copies can be vectorised). The
// padding travels: a step may stage up to 15 bytes per run more than
// plan.bucket_bytes.
//
// Without a GPU, or in a build without NCCL (HY_WITH_NCCL off), every
// factory here returns Unavailable with a message that says which; nothing
// crashes, so callers and tests decide at run time.
//
// Thread-safety: a communicator and its executors are used by one thread at
// a time (NCCL's rule for a communicator). Executors of one communicator
// must not run concurrently. The plan is shared and read-only.

#ifndef HY_RESHARD_NCCL_EXECUTOR_H_
#define HY_RESHARD_NCCL_EXECUTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/result.h"
#include "hy/reshard/executor.h"
#include "hy/reshard/plan.h"
#include "hy/reshard/transport.h"

namespace hy::reshard {

struct NcclCommOptions {
  // CUDA device of this rank; -1: the calling thread's current device.
  int device = -1;
  // Where rank 0 publishes the NCCL unique id in the KeyValueStore. Every
  // communicator of a job needs its own key.
  std::string store_key = "hy/reshard/nccl/unique_id";
  // Bound on every wait: communicator set-up, each Run's exchange, and
  // tear-down. Past it the communicator is aborted.
  int64_t timeout_ms = 10 * 60 * 1000;
};

// An NCCL communicator over the ranks of a job, bound to one CUDA device.
// Created collectively (every rank calls Create); NCCL's own non-blocking
// mode is used so that no wait is unbounded. After a failed or timed-out
// operation the communicator is aborted and every later use fails.
//
// Ownership: shared by the executors that use it (shared_ptr); destroying
// the last reference finalises the NCCL communicator.
class NcclCommunicator {
 public:
  // Rank 0 creates the unique id and Sets it (hex) under
  // options.store_key; the other ranks Get it; then all ranks initialise.
  // `store` may be null when world_size == 1 (not owned; used only here).
  // Returns InvalidArgument for a bad rank / world size / device / timeout,
  // for a missing store with world_size > 1, or for a stored value that is
  // not a unique id; Unavailable when no CUDA device is visible or hy was
  // built without NCCL; DeadlineExceeded on timeout; the store's error as
  // it returns it; Unavailable (remote / system errors) or Internal, with
  // NCCL's message, when NCCL fails.
  static Result<std::shared_ptr<NcclCommunicator>> Create(
      int rank, int world_size, KeyValueStore* store,
      const NcclCommOptions& options = NcclCommOptions());

  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int device() const { return device_; }
  int64_t timeout_ms() const { return timeout_ms_; }
  // True once an error or a timeout has aborted the communicator.
  bool aborted() const;

  // Collectives on f32 device memory of device(), for callers that keep
  // their state on the GPU (the trainer's FSDP gathers, gradient
  // reduce-scatters and tensor-parallel sums). Each is queued on `stream`
  // (a cudaStream_t; null: the legacy default stream, which orders it after
  // and before LibTorch's kernels on its default stream) and waited for
  // with the communicator's timeout: it returns once the result is written.
  // Sums follow NCCL's reduction order (not rank order: results may differ
  // from a host sum in the last bits). Collective: every rank calls the
  // same sequence with the same `count`. count == 0 does nothing.
  // Return FailedPrecondition for an aborted communicator, InvalidArgument
  // for a null buffer, DeadlineExceeded / Unavailable / Internal as Run
  // does (the communicator is aborted then), Unavailable without NCCL.
  //
  // recv[r * count, (r + 1) * count) = rank r's send[0, count).
  Status AllGather(const float* send, float* recv, size_t count,
                   void* stream = nullptr);
  // recv[0, count) = sum over ranks of their send[rank() * count, +count).
  Status ReduceScatterSum(const float* send, float* recv, size_t count,
                          void* stream = nullptr);
  // data[0, count) = sum over ranks of their data[0, count), in place.
  Status AllReduceSum(float* data, size_t count, void* stream = nullptr);

 private:
  friend class NcclExecutor;
  struct Impl;
  NcclCommunicator(int rank, int world_size, int device, int64_t timeout_ms);

  int rank_;
  int world_size_;
  int device_;
  int64_t timeout_ms_;
  std::unique_ptr<Impl> impl_;
};

struct NcclExecutorOptions {
  WireFormat wire = WireFormat::kRaw;
  // Not supported on device buffers: Create returns InvalidArgument.
  bool sparse_delta = false;
  // A cudaStream_t: Run orders itself after the work already queued on it
  // and queues nothing on it that the caller must wait for (Run returns
  // once the destination is written). Null: the legacy default stream.
  void* stream = nullptr;
  // As in ExecutorOptions (not owned; may be null).
  const metrics::HyMetrics* metrics = nullptr;
  int direction = 0;
};

class NcclExecutor {
 public:
  // Lays out this rank's share of the plan (copy ops, buckets), uploads it
  // to the communicator's device and allocates the staging buffers
  // (staging_bytes()). Returns InvalidArgument if plan or comm is null,
  // sparse_delta is set, the communicator's world size differs from the
  // plan's, or the plan refers to elements outside a shard; Unavailable
  // without NCCL; FailedPrecondition for an aborted communicator;
  // ResourceExhausted if device memory runs out; Internal for other CUDA
  // errors.
  static Result<std::unique_ptr<NcclExecutor>> Create(
      std::shared_ptr<const TransferPlan> plan,
      std::shared_ptr<NcclCommunicator> comm,
      const NcclExecutorOptions& options = NcclExecutorOptions());

  ~NcclExecutor();
  NcclExecutor(const NcclExecutor&) = delete;
  NcclExecutor& operator=(const NcclExecutor&) = delete;

  // As Executor::Run, but every buffer's data() is a device pointer on the
  // communicator's device (cudaMalloc'd, a torch tensor's data_ptr(), or
  // managed memory): src[t] this rank's source shard of tensor t in its own
  // dtype (empty when it holds none), dst[t] its destination shard in
  // WireDType. Collective. `stats` may be null; its seconds come from CUDA
  // events (pack, transfer and unpack as the GPU spent them, local copies
  // counted as unpack), total_seconds from the host clock.
  // Returns InvalidArgument before anything moves if the number or size of
  // the buffers differs from the plan, or a buffer is not device memory of
  // this device; FailedPrecondition if the communicator was aborted;
  // DeadlineExceeded on timeout, Unavailable for a peer's or the network's
  // failure and Internal for other NCCL / CUDA errors, after aborting the
  // communicator (peers waiting on this rank then time out). On error the
  // destination buffers are partly written.
  Status Run(const std::vector<ConstBytes>& src,
             const std::vector<MutableBytes>& dst, ReshardStats* stats);

  const TransferPlan& plan() const { return *plan_; }
  // Device memory this executor holds: send buckets (two), receive bucket
  // and copy-op tables.
  int64_t staging_bytes() const;

 private:
  struct Impl;
  NcclExecutor(std::shared_ptr<const TransferPlan> plan,
               std::unique_ptr<Impl> impl);

  std::shared_ptr<const TransferPlan> plan_;
  std::unique_ptr<Impl> impl_;
};

// An owned block of device memory (cudaMalloc) for callers without their
// own allocator: tools, benchmarks, tests. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;  // Empty, on no device.
  // Returns InvalidArgument for a device ordinal that is not visible,
  // Unavailable without a GPU or NCCL build, ResourceExhausted when
  // cudaMalloc fails. Zero bytes give an empty buffer.
  static Result<DeviceBuffer> Allocate(int device, size_t bytes);

  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  int device() const { return device_; }
  ConstBytes view() const { return ConstBytes(data_, size_); }
  MutableBytes mutable_view() const { return MutableBytes(data_, size_); }

  // Synchronous copies between host memory and [offset, offset + n) of the
  // buffer. Return InvalidArgument if the range does not fit, Internal for
  // a CUDA error.
  Status CopyFromHost(ConstBytes host, size_t offset = 0);
  Status CopyToHost(size_t offset, MutableBytes host) const;
  // Sets every byte to `value`. Internal for a CUDA error.
  Status Fill(uint8_t value);

 private:
  void Release();

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int device_ = -1;
};

}  // namespace hy::reshard

#endif  // HY_RESHARD_NCCL_EXECUTOR_H_
