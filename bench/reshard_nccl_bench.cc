// hy_bench_reshard_nccl: NcclExecutor on one GPU, beside cudaMemcpy of the
// same bytes (the limit). A Llama-shaped f32 model (as hy_bench_reshard's)
// is resharded dp=1 -> dp=1 on device 0 in two ways:
//   local   the plan's local copies: hy's copy / cast kernels alone
//   steps   the same copies moved into --steps exchange steps
//           (LocalCopiesAsSteps): pack kernel, ncclSend / ncclRecv to
//           self, unpack kernel, as a multi-GPU reshard runs them
// each with the raw and the bf16 wire.
//
//   hy_bench_reshard_nccl [--json] [--size-mib N] [--reps N] [--steps N]
//
// Columns: MB (the f32 source bytes), seconds (best of --reps; Run returns
// once the destination is written), GB/s (source bytes / seconds, 10^9
// bytes per GB), vs memcpy (seconds / a device-to-device cudaMemcpy of the
// source bytes, best of --reps). Every destination is checked bitwise
// against the values it must hold; a mismatch exits 1. Without a GPU it
// prints why and exits 0, so it can run anywhere.

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "hy/common/gpu.h"
#include "hy/reshard/nccl_executor.h"
#include "hy/reshard/plan.h"
#include "reshard_bench_model.h"

namespace hy::bench {
namespace {

using namespace hy::reshard;  // NOLINT: a benchmark of this one module.

struct Flags {
  bool json = false;
  int64_t size_mib = 1024;
  int reps = 5;
  int steps = 4;
};

struct Row {
  std::string mode;
  double seconds;
};

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Result<std::vector<DeviceBuffer>> Upload(const ShardBuffers& host) {
  std::vector<DeviceBuffer> out;
  for (const auto& b : host) {
    HY_ASSIGN_OR_RETURN(DeviceBuffer d, DeviceBuffer::Allocate(0, b.size()));
    HY_RETURN_IF_ERROR(d.CopyFromHost(ConstBytes(b.data(), b.size())));
    out.push_back(std::move(d));
  }
  return out;
}

// Best of reps of a D2D copy of `bytes`.
Result<double> MemcpySeconds(size_t bytes, int reps) {
  HY_ASSIGN_OR_RETURN(DeviceBuffer a, DeviceBuffer::Allocate(0, bytes));
  HY_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(0, bytes));
  HY_RETURN_IF_ERROR(a.Fill(1));
  double best = 1e30;
  for (int i = 0; i <= reps; ++i) {  // The first is a warm-up.
    const double t0 = Now();
    cudaError_t e =
        cudaMemcpy(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      return Status::Internal(std::string("cudaMemcpy: ") +
                              cudaGetErrorString(e));
    }
    if (i > 0) best = std::min(best, Now() - t0);
  }
  return best;
}

// Best of reps of `plan` under `wire`, after one warm-up run; then checks
// the destination bitwise.
Result<double> ReshardSeconds(std::shared_ptr<const TransferPlan> plan,
                              WireFormat wire, int reps,
                              const std::shared_ptr<NcclCommunicator>& comm) {
  NcclExecutorOptions options;
  options.wire = wire;
  HY_ASSIGN_OR_RETURN(auto exec, NcclExecutor::Create(plan, comm, options));
  HY_ASSIGN_OR_RETURN(auto src, Upload(MakeSourceShards(plan->src, 0)));
  ShardBuffers host_dst = MakeDestShards(plan->spec, plan->dst, 0, wire);
  HY_ASSIGN_OR_RETURN(auto dst, Upload(host_dst));
  std::vector<ConstBytes> in;
  std::vector<MutableBytes> out;
  for (const auto& b : src) in.push_back(b.view());
  for (const auto& b : dst) out.push_back(b.mutable_view());
  double best = 1e30;
  for (int i = 0; i <= reps; ++i) {
    const double t0 = Now();
    HY_RETURN_IF_ERROR(exec->Run(in, out, nullptr));
    if (i > 0) best = std::min(best, Now() - t0);
  }
  for (size_t t = 0; t < dst.size(); ++t) {
    HY_RETURN_IF_ERROR(dst[t].CopyToHost(
        0, MutableBytes(host_dst[t].data(), host_dst[t].size())));
  }
  HY_RETURN_IF_ERROR(
      VerifyShards(plan->spec, plan->dst, 0, wire, {}, host_dst));
  return best;
}

Status Run(const Flags& flags) {
  HY_ASSIGN_OR_RETURN(ModelSpec spec, LlamaSpec(flags.size_mib));
  HY_ASSIGN_OR_RETURN(Layout one, Layout::Parse("dp=1"));
  HY_ASSIGN_OR_RETURN(TransferPlan local, Plan(one, one, spec, Topology{1, 1}));
  int64_t bytes = 0;
  for (const auto& b : MakeDestShards(spec, local.dst, 0, WireFormat::kRaw)) {
    bytes += static_cast<int64_t>(b.size());
  }
  auto local_plan = std::make_shared<const TransferPlan>(local);
  auto steps_plan = std::make_shared<const TransferPlan>(
      LocalCopiesAsSteps(local, flags.steps));
  NcclCommOptions copts;
  copts.device = 0;
  HY_ASSIGN_OR_RETURN(auto comm,
                      NcclCommunicator::Create(0, 1, nullptr, copts));

  HY_ASSIGN_OR_RETURN(double memcpy_s, MemcpySeconds(bytes, flags.reps));
  std::vector<Row> rows = {{"cudaMemcpy D2D", memcpy_s}};
  for (WireFormat wire : {WireFormat::kRaw, WireFormat::kBf16}) {
    const std::string w = WireFormatName(wire);
    HY_ASSIGN_OR_RETURN(double l,
                        ReshardSeconds(local_plan, wire, flags.reps, comm));
    rows.push_back({"local " + w, l});
    HY_ASSIGN_OR_RETURN(double s,
                        ReshardSeconds(steps_plan, wire, flags.reps, comm));
    rows.push_back({"steps " + w + " (NCCL to self)", s});
  }
  const std::string gpu = GpuDeviceName(0);
  if (!flags.json) {
    std::printf("%s, %zu tensors, %d steps\n", gpu.c_str(), spec.tensors.size(),
                flags.steps);
    std::printf("| %-28s | %9s | %9s | %8s | %10s |\n", "mode", "MB", "seconds",
                "GB/s", "vs memcpy");
    std::printf(
        "|------------------------------|-----------|-----------|"
        "----------|------------|\n");
  }
  for (const Row& r : rows) {
    const double gbps = bytes / r.seconds / 1e9;
    if (flags.json) {
      std::printf(
          "{\"bench\":\"reshard_nccl\",\"gpu\":\"%s\",\"mode\":\"%s\","
          "\"bytes\":%lld,\"seconds\":%.6f,\"gbps\":%.2f,"
          "\"vs_memcpy\":%.3f}\n",
          gpu.c_str(), r.mode.c_str(), static_cast<long long>(bytes), r.seconds,
          gbps, r.seconds / memcpy_s);
    } else {
      std::printf("| %-28s | %9.1f | %9.5f | %8.1f | %10.2f |\n",
                  r.mode.c_str(), bytes / 1e6, r.seconds, gbps,
                  r.seconds / memcpy_s);
    }
  }
  return Status::OK();
}

}  // namespace
}  // namespace hy::bench

int main(int argc, char** argv) {
  hy::bench::Flags f;
  CLI::App app("NcclExecutor on one GPU beside cudaMemcpy of the same bytes",
               "hy_bench_reshard_nccl");
  hy::bench::AddJsonFlag(&app, &f.json);
  app.add_option("--size-mib", f.size_mib, "Model size in MiB")
      ->capture_default_str()
      ->check(hy::bench::AtLeast(1));
  app.add_option("--reps", f.reps, "Repetitions")
      ->capture_default_str()
      ->check(hy::bench::AtLeast(1));
  app.add_option("--steps", f.steps, "Exchange steps of the 'steps' mode")
      ->capture_default_str()
      ->check(hy::bench::AtLeast(1));
  if (int code = hy::bench::ParseFlags(&app, argc, argv); code >= 0) {
    return code;
  }
  if (hy::GpuDeviceCount() == 0) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  const hy::Status s = hy::bench::Run(f);
  if (!s.ok()) {
    std::fprintf(stderr, "hy_bench_reshard_nccl: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
