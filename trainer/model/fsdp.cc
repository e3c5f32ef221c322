#include "hy/trainer/model/fsdp.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "hy/reshard/layout.h"
#include "hy/trainer/model/comm.h"
#include "hy/trainer/model/model.h"

namespace hy::trainer {

// Elements per step of the piece-wise optimizer math (its temporaries are
// this size, not the piece's).
constexpr int64_t kChunk = int64_t{1} << 20;

Result<std::unique_ptr<FsdpModel>> FsdpModel::Create(const ModelConfig& config,
                                                     ModelRole role, int rank,
                                                     int world_size,
                                                     bool optimizer,
                                                     const at::Device& device) {
  HY_RETURN_IF_ERROR(ValidateModelConfig(config));
  std::unique_ptr<FsdpModel> m(new FsdpModel());
  m->config_ = config;
  m->role_ = role;
  m->rank_ = rank;
  m->world_ = world_size;
  HY_ASSIGN_OR_RETURN(
      m->spec_, reshard::ModelSpec::Build(ModelTensors(config, role),
                                          reshard::ModelRules::Default()));
  HY_ASSIGN_OR_RETURN(reshard::Layout layout,
                      reshard::Layout::Make(1, 1, 1, world_size));
  HY_ASSIGN_OR_RETURN(m->shard_map_,
                      reshard::ShardMap::Build(layout, m->spec_));
  int64_t total = 0;
  for (const auto& t : m->spec_.tensors) {
    HY_ASSIGN_OR_RETURN(int64_t n, t.meta.NumElements());
    m->offset_.push_back(total);
    m->numel_.push_back(n);
    total += n;
  }
  m->piece_ = (total + world_size - 1) / world_size;
  // The pieces must be what reshard's ShardMap says rank `rank` holds.
  for (int t = 0; t < m->num_tensors(); ++t) {
    const int64_t begin = std::max(m->offset_[t], rank * m->piece_);
    const int64_t end =
        std::min(m->offset_[t] + m->numel_[t], (rank + 1) * m->piece_);
    const reshard::RankShard& s = m->shard_map_.Get(rank, t);
    const int64_t mine = std::max<int64_t>(0, end - begin);
    if (s.num_elements != mine ||
        (mine > 0 &&
         (s.runs.size() != 1 || s.runs[0].offset != begin - m->offset_[t]))) {
      return Status::Internal("FSDP piece of " + s.geometry.ToString() +
                              " disagrees with reshard's ShardMap");
    }
  }
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  m->params_ = at::zeros({m->piece_}, options);
  const int64_t moments = optimizer ? m->piece_ : 0;
  m->exp_avg_ = at::zeros({moments}, options);
  m->exp_avg_sq_ = at::zeros({moments}, options);
  return m;
}

at::Tensor FsdpModel::LocalSlice(const at::Tensor& buffer, int t) const {
  const int64_t base = rank_ * piece_;
  const int64_t begin = std::max(offset_[t], base);
  const int64_t end = std::min(offset_[t] + numel_[t], base + piece_);
  if (end <= begin) return buffer.narrow(0, 0, 0);
  return buffer.narrow(0, begin - base, end - begin);
}

void FsdpModel::InitFromSeed(uint64_t seed) {
  for (int t = 0; t < num_tensors(); ++t) {
    at::Tensor local = LocalSlice(params_, t);
    if (local.numel() == 0) continue;
    const auto& meta = spec_.tensors[t].meta;
    at::Tensor full = InitTensor(seed, meta.name, meta.shape).view({-1});
    const int64_t begin = std::max(offset_[t], rank_ * piece_) - offset_[t];
    local.copy_(full.narrow(0, begin, local.numel()));
  }
}

Status FsdpModel::LoadFrom(const HfWeights& weights) {
  for (int t = 0; t < num_tensors(); ++t) {
    at::Tensor local = LocalSlice(params_, t);
    if (local.numel() == 0) continue;
    const std::string& name = spec_.tensors[t].meta.name;
    if (name.rfind("score.", 0) == 0) {  // The critic's new head.
      local.zero_();
      continue;
    }
    const int64_t begin = std::max(offset_[t], rank_ * piece_) - offset_[t];
    // Read on the host (into the piece itself on the CPU).
    at::Tensor host = local.is_cpu() ? local : at::empty({local.numel()});
    HY_RETURN_IF_ERROR(
        weights.ReadF32(name, begin, host.numel(), host.data_ptr<float>()));
    if (!local.is_cpu()) local.copy_(host);
  }
  return Status::OK();
}

void FsdpModel::CopyCommonFrom(
    const std::function<at::Tensor(const std::string&)>& other) {
  for (int t = 0; t < num_tensors(); ++t) {
    at::Tensor local = LocalSlice(params_, t);
    if (local.numel() == 0) continue;
    const auto& name = spec_.tensors[t].meta.name;
    at::Tensor src = other(name);
    if (!src.defined()) continue;
    const int64_t begin = std::max(offset_[t], rank_ * piece_) - offset_[t];
    local.copy_(src.reshape({-1}).narrow(0, begin, local.numel()));
  }
}

Status FsdpModel::Gather(Comm* comm, at::Tensor* full) const {
  return comm->AllGatherShards(params_, full);
}

void FsdpModel::TrackGradient(at::Tensor* full) {
  full->mutable_grad() = at::zeros_like(*full);
}

at::Tensor FsdpModel::View(const at::Tensor& full,
                           const std::string& name) const {
  const int t = spec_.Find(name);
  if (t < 0) return at::Tensor();
  return ViewAt(full, offset_[t], numel_[t], spec_.tensors[t].meta.shape);
}

at::Tensor FsdpModel::ViewAt(const at::Tensor& buffer, int64_t at, int64_t n,
                             const std::vector<int64_t>& shape) {
  at::Tensor region = buffer.narrow(0, at, n);
  if (!buffer.grad().defined()) return region.view(shape);
  // A leaf on the same memory; backward adds into its .grad in place (the
  // engine accumulates into a defined gradient), i.e. into buffer's.
  at::Tensor leaf = region.detach().view(shape).requires_grad_(true);
  leaf.mutable_grad() = buffer.grad().narrow(0, at, n).view(shape);
  return leaf;
}

double FsdpModel::SquaredNorm(const at::Tensor& grad) {
  double sum = 0;
  for (int64_t at = 0; at < grad.numel(); at += kChunk) {
    at::Tensor g = grad.narrow(0, at, std::min(kChunk, grad.numel() - at));
    sum += g.to(at::kDouble).pow(2).sum().item<double>();
  }
  return sum;
}

void FsdpModel::AdamStep(const at::Tensor& grad, const OptimConfig& o,
                         double grad_scale) {
  ++adam_step_;
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(adam_step_));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(adam_step_));
  // Element-wise, so a chunk at a time gives the same values while the
  // temporaries (the scaled gradient, the denominator) stay a chunk's size
  // instead of the piece's (a whole f32 model at world 1).
  for (int64_t at = 0; at < piece_; at += kChunk) {
    const int64_t n = std::min(kChunk, piece_ - at);
    at::Tensor p = params_.narrow(0, at, n);
    at::Tensor m_home = exp_avg_.narrow(0, at, n);
    at::Tensor v_home = exp_avg_sq_.narrow(0, at, n);
    // Moments offloaded to the host while the parameters are on a GPU:
    // this chunk's come over, step there, and go back.
    const bool staged = m_home.device() != p.device();
    at::Tensor m = staged ? m_home.to(p.device()) : m_home;
    at::Tensor v = staged ? v_home.to(p.device()) : v_home;
    at::Tensor g = grad.narrow(0, at, n);
    if (grad_scale != 1.0) g = g * grad_scale;
    if (o.weight_decay != 0) p.mul_(1.0 - o.lr * o.weight_decay);
    m.mul_(o.beta1).add_(g, 1.0 - o.beta1);
    v.mul_(o.beta2).addcmul_(g, g, 1.0 - o.beta2);
    at::Tensor denom = (v.sqrt() / std::sqrt(bc2)).add_(o.eps);
    p.addcdiv_(m, denom, -o.lr / bc1);
    if (staged) {
      m_home.copy_(m);
      v_home.copy_(v);
    }
    if (moments_file_ != nullptr) {  // Stepped: back to the file.
      for (const at::Tensor* t : {&m_home, &v_home}) {
        moments_file_
            ->ReleaseRange(
                ConstBytes(static_cast<const uint8_t*>(t->data_ptr()),
                           t->nbytes()))
            .IgnoreError();  // Advice only: the values stay either way.
      }
    }
  }
}

Status FsdpModel::OffloadMoments(const std::string& dir) {
  if (moments_file_ != nullptr || moments_pinned_) return Status::OK();
  if (params_.is_cuda()) {
    // Page-locked host memory (ZeRO-Offload's way): AdamStep's copies of a
    // chunk to the device and back run at the link's speed. Pinned pages
    // cannot be handed back to the kernel, so no file here.
    const auto pinned =
        at::TensorOptions().dtype(at::kFloat).pinned_memory(true);
    at::Tensor m = at::empty({exp_avg_.numel()}, pinned);
    at::Tensor v = at::empty({exp_avg_sq_.numel()}, pinned);
    m.copy_(exp_avg_);
    v.copy_(exp_avg_sq_);
    exp_avg_ = m;
    exp_avg_sq_ = v;
    moments_pinned_ = true;
    return Status::OK();
  }
  // exp_avg_sq starts on a page boundary (the mapping's start is one, and
  // a chunk is whole pages), so each chunk's release covers all its pages.
  const int64_t page = static_cast<int64_t>(::sysconf(_SC_PAGESIZE)) / 4;
  const int64_t first = (piece_ + page - 1) / page * page;
  HY_ASSIGN_OR_RETURN(OffloadedTensor file,
                      OffloadedTensor::Create(dir, first + piece_));
  at::Tensor m = file.tensor().narrow(0, 0, piece_);
  at::Tensor v = file.tensor().narrow(0, first, piece_);
  m.copy_(exp_avg_);
  v.copy_(exp_avg_sq_);
  exp_avg_ = m;
  exp_avg_sq_ = v;
  moments_file_ = std::make_unique<OffloadedTensor>(std::move(file));
  return moments_file_->Release();
}

Status FsdpModel::ReleaseMoments() const {
  return moments_file_ != nullptr ? moments_file_->Release() : Status::OK();
}

void FsdpModel::ResetOptimizer() {
  exp_avg_.zero_();
  exp_avg_sq_.zero_();
  adam_step_ = 0;
}

std::vector<statestore::ShardData> FsdpModel::ShardsForSave(
    const std::string& prefix, bool optimizer) const {
  std::vector<statestore::ShardData> out;
  struct Part {
    std::string infix;
    const at::Tensor* buffer;
  };
  std::vector<Part> parts = {{"/", &params_}};
  if (optimizer) {
    parts.push_back({"/exp_avg/", &exp_avg_});
    parts.push_back({"/exp_avg_sq/", &exp_avg_sq_});
  }
  for (const Part& part : parts) {
    const bool offloaded = moments_file_ != nullptr && part.buffer != &params_;
    for (int t = 0; t < num_tensors(); ++t) {
      const reshard::RankShard& s = shard_map_.Get(rank_, t);
      if (!s.has_shard || s.num_elements == 0) continue;
      at::Tensor local = LocalSlice(*part.buffer, t);
      statestore::ShardData d;
      d.meta = spec_.tensors[t].meta;
      d.meta.name = prefix + part.infix + d.meta.name;
      d.geometry = s.geometry;
      d.data = ConstBytes(static_cast<const uint8_t*>(local.data_ptr()),
                          static_cast<size_t>(local.numel() * 4));
      d.on_gpu = local.is_cuda();
      if (offloaded) {  // Each chunk's pages go back once the save has read it.
        d.after_chunk_read = [file = *moments_file_](ConstBytes chunk) {
          file.ReleaseRange(chunk).IgnoreError();
        };
      }
      out.push_back(std::move(d));
    }
  }
  return out;
}

}  // namespace hy::trainer
