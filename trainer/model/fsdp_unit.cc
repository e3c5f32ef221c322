#include "hy/trainer/model/fsdp_unit.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "hy/trainer/model/comm.h"

namespace hy::trainer {
namespace {

// n floats at `data` (host or device memory, as `like`) as a tensor.
at::Tensor Wrap(float* data, int64_t n, const at::Tensor& like) {
  return at::from_blob(data, {n}, like.options());
}

// "model.layers.<i>." -> i; -1 for the root's tensors.
int LayerOf(const std::string& name) {
  static const std::string kPrefix = "model.layers.";
  if (name.rfind(kPrefix, 0) != 0) return -1;
  return std::atoi(name.c_str() + kPrefix.size());
}

}  // namespace

FsdpUnits::FsdpUnits(const FsdpModel* model, int64_t reduce_window)
    : model_(model), reduce_window_(std::max<int64_t>(1, reduce_window)) {
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

FsdpUnits::FlatRun FsdpUnits::Part(const FlatRun& r, int p) const {
  const int64_t base = p * model_->piece();
  FlatRun part;
  part.begin = std::max(r.begin, base);
  part.end = std::max(part.begin, std::min(r.end, base + model_->piece()));
  part.data = r.data + (part.begin - r.begin);
  return part;
}

std::vector<FsdpUnits::FlatRun> FsdpUnits::UnitRuns(
    int unit, const at::Tensor& buffer) const {
  float* data = buffer.data_ptr<float>();
  std::vector<FlatRun> runs;
  for (const Range& r : units_[unit].ranges) {
    runs.push_back(FlatRun{r.begin, r.end, data + r.at});
  }
  return runs;
}

Status FsdpUnits::Gather(Comm* comm, int unit, at::Tensor* buffer) const {
  *buffer = at::empty({units_[unit].numel}, model_->params_const().options());
  return GatherRuns(comm, UnitRuns(unit, *buffer));
}

Status FsdpUnits::GatherRunsEqual(Comm* comm,
                                  const std::vector<FlatRun>& runs) const {
  const int me = model_->rank();
  const int world = model_->world_size();
  const int64_t base = me * model_->piece();
  const at::Tensor& params = model_->params_const();
  int64_t longest = 0;
  for (int q = 0; q < world; ++q) {
    longest = std::max(longest, StreamLength(runs, q));
  }
  if (longest == 0) return Status::OK();
  // My stream, padded to the longest (the padding is never read).
  at::Tensor send = at::empty({longest}, params.options());
  VisitStream(runs, me, 0, INT64_MAX,
              [&](int64_t flat, float* out, int64_t n, int64_t pos) {
                const at::Tensor src = params.narrow(0, flat - base, n);
                send.narrow(0, pos, n).copy_(src);
                Wrap(out, n, params).copy_(src);
              });
  at::Tensor all;
  HY_RETURN_IF_ERROR(comm->AllGatherEqual(send, &all));
  for (int p = 0; p < world; ++p) {
    if (p == me) continue;
    VisitStream(
        runs, p, 0, INT64_MAX,
        [&](int64_t, float* out, int64_t n, int64_t pos) {
          Wrap(out, n, params).copy_(all.narrow(0, p * longest + pos, n));
        });
  }
  return Status::OK();
}

Status FsdpUnits::GatherRuns(Comm* comm,
                             const std::vector<FlatRun>& runs) const {
  if (comm->equal_size_collectives()) return GatherRunsEqual(comm, runs);
  const int me = model_->rank();
  const int64_t base = me * model_->piece();
  const int64_t all = INT64_MAX;  // Past any stream's end.
  const float* params = model_->params_const().data_ptr<float>();
  // Mine: my stream, sent straight from the piece when it is one run,
  // else concatenated.
  std::vector<std::pair<const float*, size_t>> my_parts;
  VisitStream(runs, me, 0, all,
              [&](int64_t flat, float* out, int64_t n, int64_t) {
                const float* src = params + (flat - base);
                std::memcpy(out, src, n * sizeof(float));
                my_parts.push_back({src, static_cast<size_t>(n)});
              });
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
  // Where each rank's stream lands: when every rank's is one run of the
  // destination, each is received there in place, without a copy of the
  // other parts. Every rank decides alike (the same collective follows).
  const int world = model_->world_size();
  std::vector<MutableBytes> into(world);
  bool in_place = true;
  for (int p = 0; p < world && in_place; ++p) {
    int pieces = 0;
    VisitStream(runs, p, 0, all, [&](int64_t, float* out, int64_t n, int64_t) {
      if (p != me) {
        into[p] = MutableBytes(out, static_cast<size_t>(n) * sizeof(float));
      }
      ++pieces;
    });
    in_place = pieces <= 1;
  }
  if (in_place) {
    return comm->transport()->AllGatherInto(send, into);
  }
  std::vector<std::vector<uint8_t>> parts;
  HY_RETURN_IF_ERROR(comm->transport()->AllGatherV(send, &parts));
  for (int p = 0; p < world; ++p) {
    if (p == me) continue;
    const uint64_t want = StreamLength(runs, p) * sizeof(float);
    if (parts[p].size() != want) {
      return Status::Internal("FSDP unit gather: rank " + std::to_string(p) +
                              " sent " + std::to_string(parts[p].size()) +
                              " bytes, expected " + std::to_string(want));
    }
    const float* from = reinterpret_cast<const float*>(parts[p].data());
    VisitStream(runs, p, 0, all,
                [&](int64_t, float* out, int64_t n, int64_t pos) {
                  std::memcpy(out, from + pos, n * sizeof(float));
                });
  }
  return Status::OK();
}

int64_t FsdpUnits::StreamLength(const std::vector<FlatRun>& runs, int q) const {
  int64_t n = 0;
  for (const FlatRun& r : runs) {
    const FlatRun part = Part(r, q);
    n += part.end - part.begin;
  }
  return n;
}

void FsdpUnits::VisitStream(
    const std::vector<FlatRun>& runs, int q, int64_t lo, int64_t hi,
    const std::function<void(int64_t flat, float* data, int64_t n,
                             int64_t pos)>& fn) const {
  int64_t pos = 0;
  for (const FlatRun& r : runs) {
    if (pos >= hi) break;
    const FlatRun part = Part(r, q);
    const int64_t n = part.end - part.begin;
    const int64_t a = std::max(lo, pos), b = std::min(hi, pos + n);
    if (a < b) fn(part.begin + (a - pos), part.data + (a - pos), b - a, a);
    pos += n;
  }
}

Status FsdpUnits::ReduceGradient(Comm* comm, int unit, const at::Tensor& grad,
                                 at::Tensor* piece) const {
  const at::Tensor g = grad.contiguous();
  return ReduceRuns(comm, UnitRuns(unit, g), piece);
}

Status FsdpUnits::ReduceRunsEqual(Comm* comm, const std::vector<FlatRun>& runs,
                                  at::Tensor* piece) const {
  const int me = model_->rank();
  const int world = model_->world_size();
  const int64_t base = me * model_->piece();
  int64_t longest = 0;
  for (int q = 0; q < world; ++q) {
    longest = std::max(longest, StreamLength(runs, q));
  }
  // Per round, owner p's window of my gradient at [p * width, +width) of
  // one buffer, zero-padded; the reduce-scatter hands me the sum of mine.
  for (int64_t lo = 0; lo < longest; lo += reduce_window_) {
    const int64_t hi = lo + reduce_window_;
    const int64_t width = std::min(reduce_window_, longest - lo);
    at::Tensor send = at::zeros({world * width}, piece->options());
    for (int p = 0; p < world; ++p) {
      VisitStream(runs, p, lo, hi,
                  [&](int64_t, float* data, int64_t n, int64_t pos) {
                    send.narrow(0, p * width + (pos - lo), n)
                        .copy_(Wrap(data, n, *piece));
                  });
    }
    HY_ASSIGN_OR_RETURN(const at::Tensor sum, comm->ReduceScatterSum(send));
    VisitStream(
        runs, me, lo, hi, [&](int64_t flat, float*, int64_t n, int64_t pos) {
          piece->narrow(0, flat - base, n).add_(sum.narrow(0, pos - lo, n));
        });
  }
  return Status::OK();
}

Status FsdpUnits::ReduceRuns(Comm* comm, const std::vector<FlatRun>& runs,
                             at::Tensor* piece) const {
  if (comm->equal_size_collectives()) {
    return ReduceRunsEqual(comm, runs, piece);
  }
  const int me = model_->rank();
  const int world = model_->world_size();
  float* out = piece->data_ptr<float>();
  const int64_t base = me * model_->piece();
  // Every rank sends each owner its gradient of that owner's stream, a
  // window of at most reduce_window_ elements per owner and round, so an
  // owner holds world - 1 windows, not world - 1 copies of its share (a
  // tied vocabulary is most of a rank's share of the root unit).
  int64_t longest = 0;
  for (int q = 0; q < world; ++q) {
    longest = std::max(longest, StreamLength(runs, q));
  }
  const int64_t mine = StreamLength(runs, me);
  std::vector<std::vector<float>> staged(world);
  std::vector<std::vector<uint8_t>> recv;
  for (int64_t lo = 0; lo < longest; lo += reduce_window_) {
    const int64_t hi = lo + reduce_window_;
    std::vector<ConstBytes> send(world);
    for (int p = 0; p < world; ++p) {
      staged[p].clear();
      if (p == me) continue;
      VisitStream(runs, p, lo, hi,
                  [&](int64_t, float* data, int64_t n, int64_t) {
                    staged[p].insert(staged[p].end(), data, data + n);
                  });
      send[p] = ConstBytes(reinterpret_cast<const uint8_t*>(staged[p].data()),
                           staged[p].size() * sizeof(float));
    }
    HY_RETURN_IF_ERROR(comm->transport()->AllToAllV(send, &recv));
    const int64_t expected = std::max<int64_t>(0, std::min(hi, mine) - lo);
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
      const float* from = reinterpret_cast<const float*>(recv[p].data());
      VisitStream(
          runs, me, lo, hi,
          [&](int64_t flat, float* data, int64_t n, int64_t pos) {
            const float* src = p == me ? data : from + (pos - lo);
            at::from_blob(out + (flat - base), {n}, at::kFloat)
                .add_(at::from_blob(const_cast<float*>(src), {n}, at::kFloat));
          });
    }
  }
  return Status::OK();
}

at::Tensor FsdpUnits::View(const at::Tensor& buffer, int unit,
                           const std::string& name) const {
  const int t = model_->spec().Find(name);
  if (t < 0 || unit_of_[t] != unit) return at::Tensor();
  return FsdpModel::ViewAt(buffer, unit_at_[t], model_->numel(t),
                           model_->spec().tensors[t].meta.shape);
}

}  // namespace hy::trainer
