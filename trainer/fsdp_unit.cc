#include "fsdp_unit.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "comm.h"

namespace hy::trainer {
namespace {

// "model.layers.<i>." -> i; -1 for the root's tensors.
int LayerOf(const std::string& name) {
  static const std::string kPrefix = "model.layers.";
  if (name.rfind(kPrefix, 0) != 0) return -1;
  return std::atoi(name.c_str() + kPrefix.size());
}

}  // namespace

FsdpUnits::FsdpUnits(const FsdpModel* model) : model_(model) {
  units_.resize(1 + model->config().num_layers);
  for (int t = 0; t < model->num_tensors(); ++t) {
    const int unit = 1 + LayerOf(model->spec().tensors[t].meta.name);
    Unit& u = units_[unit];
    const int64_t begin = model->offset(t);
    const int64_t end = begin + model->numel(t);
    unit_of_.push_back(unit);
    unit_at_.push_back(u.numel);
    if (!u.ranges.empty() && u.ranges.back().end == begin) {
      u.ranges.back().end = end;  // Adjacent tensors: one range.
    } else {
      u.ranges.push_back(Range{begin, end, u.numel});
    }
    u.numel += end - begin;
  }
}

FsdpUnits::Range FsdpUnits::Part(const Range& r, int p) const {
  const int64_t base = p * model_->piece();
  Range part;
  part.begin = std::max(r.begin, base);
  part.end = std::max(part.begin, std::min(r.end, base + model_->piece()));
  part.at = r.at + (part.begin - r.begin);
  return part;
}

Status FsdpUnits::Gather(Comm* comm, int unit, at::Tensor* buffer) const {
  const Unit& u = units_[unit];
  const int me = model_->rank();
  const int64_t base = me * model_->piece();
  *buffer = at::empty({u.numel}, at::kFloat);
  float* out = buffer->data_ptr<float>();
  const float* params = model_->params_const().data_ptr<float>();
  // Mine: my parts of the unit's ranges, in range order; sent straight
  // from the piece when there is one, else concatenated.
  std::vector<std::pair<const float*, size_t>> my_parts;
  for (const Range& r : u.ranges) {
    const Range part = Part(r, me);
    const size_t n = static_cast<size_t>(part.end - part.begin);
    if (n == 0) continue;
    const float* src = params + (part.begin - base);
    std::memcpy(out + part.at, src, n * sizeof(float));
    my_parts.push_back({src, n});
  }
  std::vector<float> joined;
  if (my_parts.size() > 1) {
    for (const auto& [src, n] : my_parts)
      joined.insert(joined.end(), src, src + n);
  }
  const ConstBytes send =
      my_parts.size() == 1
          ? ConstBytes(reinterpret_cast<const uint8_t*>(my_parts[0].first),
                       my_parts[0].second * sizeof(float))
          : ConstBytes(reinterpret_cast<const uint8_t*>(joined.data()),
                       joined.size() * sizeof(float));
  std::vector<std::vector<uint8_t>> parts;
  HY_RETURN_IF_ERROR(comm->transport()->AllGatherV(send, &parts));
  for (int p = 0; p < model_->world_size(); ++p) {
    if (p == me) continue;
    size_t at = 0;
    for (const Range& r : u.ranges) {
      const Range part = Part(r, p);
      const size_t bytes = (part.end - part.begin) * sizeof(float);
      if (at + bytes > parts[p].size()) {
        return Status::Internal("FSDP unit gather: rank " + std::to_string(p) +
                                " sent " + std::to_string(parts[p].size()) +
                                " bytes, too few");
      }
      std::memcpy(out + part.at, parts[p].data() + at, bytes);
      at += bytes;
    }
    if (at != parts[p].size()) {
      return Status::Internal("FSDP unit gather: rank " + std::to_string(p) +
                              " sent " + std::to_string(parts[p].size()) +
                              " bytes, expected " + std::to_string(at));
    }
  }
  return Status::OK();
}

Status FsdpUnits::ReduceGradient(Comm* comm, int unit, const at::Tensor& grad,
                                 at::Tensor* piece) const {
  const Unit& u = units_[unit];
  const int me = model_->rank();
  const int world = model_->world_size();
  at::Tensor g = grad.contiguous();
  // send[p]: my gradient of the parts rank p holds, in range order.
  std::vector<at::Tensor> staged(world);
  std::vector<ConstBytes> send(world);
  for (int p = 0; p < world; ++p) {
    if (p == me) continue;
    std::vector<at::Tensor> segs;
    for (const Range& r : u.ranges) {
      const Range part = Part(r, p);
      if (part.end > part.begin) {
        segs.push_back(g.narrow(0, part.at, part.end - part.begin));
      }
    }
    if (segs.empty()) continue;
    staged[p] = segs.size() == 1 ? segs[0] : at::cat(segs);
    send[p] = ConstBytes(static_cast<const uint8_t*>(staged[p].data_ptr()),
                         static_cast<size_t>(staged[p].numel() * 4));
  }
  std::vector<std::vector<uint8_t>> recv;
  HY_RETURN_IF_ERROR(comm->transport()->AllToAllV(send, &recv));
  const int64_t base = me * model_->piece();
  int64_t expected = 0;
  for (const Range& r : u.ranges) {
    const Range part = Part(r, me);
    expected += part.end - part.begin;
  }
  for (int p = 0; p < world; ++p) {
    if (p != me && static_cast<int64_t>(recv[p].size()) != expected * 4) {
      return Status::Internal("FSDP unit reduce: rank " + std::to_string(p) +
                              " sent " + std::to_string(recv[p].size()) +
                              " bytes, expected " +
                              std::to_string(expected * 4));
    }
  }
  // Rank order, as Comm::ReduceScatterSum: 0 + g_0 + g_1 + ...
  for (int p = 0; p < world; ++p) {
    int64_t at = 0;
    for (const Range& r : u.ranges) {
      const Range part = Part(r, me);
      const int64_t n = part.end - part.begin;
      if (n == 0) continue;
      at::Tensor dst = piece->narrow(0, part.begin - base, n);
      if (p == me) {
        dst.add_(g.narrow(0, part.at, n));
      } else {
        dst.add_(at::from_blob(recv[p].data() + at * 4, {n}, at::kFloat));
      }
      at += n;
    }
  }
  return Status::OK();
}

at::Tensor FsdpUnits::View(const at::Tensor& buffer, int unit,
                           const std::string& name) const {
  const int t = model_->spec().Find(name);
  if (t < 0 || unit_of_[t] != unit) return at::Tensor();
  const auto& shape = model_->spec().tensors[t].meta.shape;
  const int64_t n = model_->numel(t);
  at::Tensor region = buffer.narrow(0, unit_at_[t], n);
  if (!buffer.grad().defined()) return region.view(shape);
  at::Tensor leaf = region.detach().view(shape).requires_grad_(true);
  leaf.mutable_grad() = buffer.grad().narrow(0, unit_at_[t], n).view(shape);
  return leaf;
}

}  // namespace hy::trainer
