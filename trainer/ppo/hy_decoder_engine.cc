// HyDecoderEngine: the reshard to the rollout layout and generation with
// hy's decoder.

#include "hy_decoder_engine.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "hy/reshard/layout.h"
#include "hy/reshard/plan.h"

namespace hy::trainer {
namespace {

std::vector<uint8_t> TensorBytes(const at::Tensor& t) {
  at::Tensor c = t.cpu().contiguous();
  std::vector<uint8_t> out(static_cast<size_t>(c.numel() * c.element_size()));
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

}  // namespace

HyDecoderEngine::HyDecoderEngine(const RolloutContext& ctx) : ctx_(ctx) {}

HyDecoderEngine::~HyDecoderEngine() = default;

Status HyDecoderEngine::Plan() {
  Comm* comm = ctx_.comm;
  const int world = comm->world_size();
  HY_ASSIGN_OR_RETURN(reshard::Layout train,
                      reshard::Layout::Make(1, 1, 1, world));
  HY_ASSIGN_OR_RETURN(reshard::Layout rollout,
                      reshard::Layout::Make(comm->tp_size(), 1,
                                            world / comm->tp_size(), 1));
  reshard::Topology topology;
  topology.world_size = world;
  topology.ranks_per_node = world;
  HY_ASSIGN_OR_RETURN(
      reshard::TransferPlan plan,
      reshard::Plan(train, rollout, ctx_.actor->spec(), topology));
  plan_ = std::make_shared<const reshard::TransferPlan>(std::move(plan));
  if (comm->on_cuda()) {
    // Device buffers, over NCCL (on one GPU: its copy and cast kernels).
    // Sparse delta is a host wire format: the full bf16 wire here.
    reshard::NcclExecutorOptions no;
    no.wire = reshard::WireFormat::kBf16;
    no.metrics = ctx_.metrics;
    no.direction = 0;
    HY_ASSIGN_OR_RETURN(nccl_executor_,
                        reshard::NcclExecutor::Create(plan_, comm->nccl(), no));
  } else {
    reshard::ExecutorOptions eo;
    eo.wire = reshard::WireFormat::kBf16;
    eo.sparse_delta = true;
    eo.metrics = ctx_.metrics;
    eo.direction = 0;
    executor_ =
        std::make_unique<reshard::Executor>(plan_, comm->transport(), eo);
  }
  HY_RETURN_IF_ERROR(AllocateShards());
  HY_ASSIGN_OR_RETURN(weights_,
                      BindWeights(ctx_.config->model, ModelRole::kActor,
                                  [this](const std::string& name) {
                                    const int t = ctx_.actor->spec().Find(name);
                                    return t < 0 ? at::Tensor() : shards_[t];
                                  }));
  return Status::OK();
}

Status HyDecoderEngine::AllocateShards() {
  std::vector<std::vector<int64_t>> sizes;
  std::vector<int64_t> numels;
  for (int t = 0; t < ctx_.actor->num_tensors(); ++t) {
    sizes.push_back(
        plan_->dst.Get(ctx_.comm->rank(), t).geometry.box().sizes);
    numels.push_back(std::accumulate(sizes.back().begin(), sizes.back().end(),
                                     int64_t{1}, std::multiplies<int64_t>()));
  }
  const int64_t total =
      std::accumulate(numels.begin(), numels.end(), int64_t{0});
  at::Tensor flat;
  offload_.reset();
  if (ctx_.config->trainer.offload_rollout) {
    const std::string dir = ctx_.node_directory();
    HY_ASSIGN_OR_RETURN(OffloadedTensor t,
                        OffloadedTensor::Create(dir, total, at::kBFloat16));
    offload_ = std::make_unique<OffloadedTensor>(std::move(t));
    flat = offload_->tensor();
    ctx_.log("rollout weights offloaded to a file in " + dir);
  } else {
    flat = at::empty(
        {total},
        at::TensorOptions().dtype(at::kBFloat16).device(ctx_.comm->device()));
  }
  shards_.clear();
  int64_t offset = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    shards_.push_back(flat.narrow(0, offset, numels[t]).view(sizes[t]));
    offset += numels[t];
  }
  return Status::OK();
}

Status HyDecoderEngine::LoadWeights(int64_t weight_version,
                                    IterationReport* report) {
  (void)weight_version;
  if (plan_ == nullptr) HY_RETURN_IF_ERROR(Plan());
  FsdpModel& actor = *ctx_.actor;
  std::vector<ConstBytes> src;
  std::vector<MutableBytes> dst;
  for (int t = 0; t < actor.num_tensors(); ++t) {
    at::Tensor local = actor.LocalSlice(actor.params(), t);
    src.emplace_back(static_cast<const uint8_t*>(local.data_ptr()),
                     static_cast<size_t>(local.numel() * 4));
    dst.emplace_back(static_cast<uint8_t*>(shards_[t].data_ptr()),
                     static_cast<size_t>(shards_[t].numel() * 2));
  }
  reshard::ReshardStats stats;
  HY_RETURN_IF_ERROR(nccl_executor_ != nullptr
                         ? nccl_executor_->Run(src, dst, &stats)
                         : executor_->Run(src, dst, &stats));
  Park();
  return ReportStats(stats, report);
}

Status HyDecoderEngine::ReportStats(const reshard::ReshardStats& stats,
                                    IterationReport* report) {
  Comm* comm = ctx_.comm;
  const double logical = static_cast<double>(
      stats.local_bytes + stats.same_node_bytes + stats.cross_node_bytes);
  double ms = stats.total_seconds * 1000.0;
  HY_ASSIGN_OR_RETURN(
      auto sums, comm->SumAcrossRanks(
                     {static_cast<double>(stats.wire_bytes_sent), logical}));
  std::vector<uint8_t> mine(sizeof(double));
  std::memcpy(mine.data(), &ms, sizeof(double));
  HY_ASSIGN_OR_RETURN(auto all_ms, comm->AllGatherBytes(mine));
  for (const auto& b : all_ms) {
    double x;
    std::memcpy(&x, b.data(), sizeof(double));
    ms = std::max(ms, x);
  }
  report->reshard_ms = ms;
  report->reshard_bytes = static_cast<int64_t>(sums[0]);
  report->reshard_logical_bytes = static_cast<int64_t>(sums[1]);
  return Status::OK();
}

Result<at::Tensor> HyDecoderEngine::Generate(const std::vector<Prompt>& items,
                                             int64_t prompt_len,
                                             uint64_t iteration,
                                             const RolloutConfig& rc,
                                             at::Tensor* engine_logp,
                                             IterationReport* report) {
  (void)engine_logp;
  (void)report;
  Comm* comm = ctx_.comm;
  const int64_t total = static_cast<int64_t>(items.size());
  // This dp group's share.
  const int64_t g = comm->dp_rank();
  const int64_t groups = comm->dp_size();
  const int64_t lo = total * g / groups;
  const int64_t hi = total * (g + 1) / groups;
  std::vector<Prompt> mine(items.begin() + lo, items.begin() + hi);
  std::vector<int64_t> ids;
  for (int64_t j = lo; j < hi; ++j) ids.push_back(j);
  TpContext tp{comm->tp_size(), comm->tp_rank(), comm};
  const TokenSpec& spec = ctx_.source->token_spec();
  HY_ASSIGN_OR_RETURN(
      at::Tensor responses,
      GenerateResponses(ctx_.config->model, weights_, tp,
                        BuildPrompts(mine, prompt_len, spec), ids,
                        ctx_.config->trainer.seed, iteration, rc, spec));
  // Every rank gets every group's responses (the TP leader's copy).
  std::vector<uint8_t> bytes;
  if (comm->tp_rank() == 0) bytes = TensorBytes(responses);
  HY_ASSIGN_OR_RETURN(auto all, comm->AllGatherBytes(bytes));
  std::vector<at::Tensor> parts;
  for (int p = 0; p < comm->world_size(); p += comm->tp_size()) {
    const int64_t rows =
        static_cast<int64_t>(all[p].size()) / 8 / rc.response_length;
    parts.push_back(
        at::from_blob(all[p].data(), {rows, rc.response_length}, at::kLong)
            .clone());
  }
  at::Tensor out = at::cat(parts, 0);
  if (out.size(0) != total) {
    return Status::Internal("rollout: gathered " + std::to_string(out.size(0)) +
                            " responses, expected " + std::to_string(total));
  }
  return out;
}

void HyDecoderEngine::Release() {
  if (offload_ == nullptr) return;
  Status s = offload_->Release();
  if (!s.ok()) ctx_.log("rollout offload: " + s.ToString());
}

void HyDecoderEngine::Park() {
  if (!ctx_.config->trainer.offload_rollout || executor_ == nullptr) return;
  Status s = executor_->Park(ctx_.node_directory());
  if (!s.ok()) ctx_.log("reshard park: " + s.ToString());
}

}  // namespace hy::trainer
