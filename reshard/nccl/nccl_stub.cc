// hy_reshard_nccl for builds without NCCL (HY_WITH_NCCL off): the same API,
// every factory returning Unavailable, so callers and tests build anywhere.

#include <string>
#include <utility>

#include "checks.h"
#include "copy_ops.h"
#include "hy/reshard/nccl_executor.h"

namespace hy::reshard {

namespace {

Status NotBuilt(const char* what) {
  return Status::Unavailable(std::string(what) +
                             ": hy was built without CUDA/NCCL "
                             "(HY_WITH_CUDA or HY_WITH_NCCL is OFF)");
}

}  // namespace

struct NcclCommunicator::Impl {};
struct NcclExecutor::Impl {};

NcclCommunicator::NcclCommunicator(int rank, int world_size, int device,
                                   int64_t timeout_ms)
    : rank_(rank),
      world_size_(world_size),
      device_(device),
      timeout_ms_(timeout_ms) {}

NcclCommunicator::~NcclCommunicator() = default;

bool NcclCommunicator::aborted() const { return true; }

Status NcclCommunicator::AllGather(const float*, float*, size_t, void*) {
  return NotBuilt("NcclCommunicator::AllGather");
}

Status NcclCommunicator::ReduceScatterSum(const float*, float*, size_t, void*) {
  return NotBuilt("NcclCommunicator::ReduceScatterSum");
}

Status NcclCommunicator::AllReduceSum(float*, size_t, void*) {
  return NotBuilt("NcclCommunicator::AllReduceSum");
}

Result<std::shared_ptr<NcclCommunicator>> NcclCommunicator::Create(
    int rank, int world_size, KeyValueStore* store,
    const NcclCommOptions& options) {
  HY_RETURN_IF_ERROR(
      nccl_internal::CheckCommArgs(rank, world_size, store, options));
  return NotBuilt("NcclCommunicator");
}

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
  return NotBuilt("NcclExecutor");
}

Status NcclExecutor::Run(const std::vector<ConstBytes>&,
                         const std::vector<MutableBytes>&, ReshardStats*) {
  return NotBuilt("NcclExecutor::Run");
}

int64_t NcclExecutor::staging_bytes() const { return 0; }

Result<DeviceBuffer> DeviceBuffer::Allocate(int, size_t) {
  return NotBuilt("DeviceBuffer");
}

DeviceBuffer::~DeviceBuffer() = default;

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(other.data_), size_(other.size_), device_(other.device_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  data_ = other.data_;
  size_ = other.size_;
  device_ = other.device_;
  other.data_ = nullptr;
  other.size_ = 0;
  return *this;
}

void DeviceBuffer::Release() {}

Status DeviceBuffer::CopyFromHost(ConstBytes, size_t) {
  return NotBuilt("DeviceBuffer");
}

Status DeviceBuffer::CopyToHost(size_t, MutableBytes) const {
  return NotBuilt("DeviceBuffer");
}

Status DeviceBuffer::Fill(uint8_t) { return NotBuilt("DeviceBuffer"); }

namespace nccl_internal {

Status GpuCopyRuns(const void*, void*, const std::vector<CopyRun>& runs,
                   int elem_size, bool cast) {
  HY_RETURN_IF_ERROR(CheckCopyRuns(runs, elem_size, cast));
  return NotBuilt("GpuCopyRuns");
}

}  // namespace nccl_internal

}  // namespace hy::reshard
