#include "fsdp_vocab.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "hy/trainer/model/comm.h"

namespace hy::trainer {

ShardedVocab::ShardedVocab(const FsdpModel* model, const FsdpUnits* units,
                           Comm* comm, int t, bool train, int64_t chunk_rows,
                           std::function<at::Tensor*()> piece)
    : VocabMatrix(model->spec().tensors[t].meta.shape[0],
                  model->spec().tensors[t].meta.shape[1], chunk_rows),
      model_(model),
      units_(units),
      comm_(comm),
      offset_(model->offset(t)),
      train_(train),
      piece_(std::move(piece)) {}

Result<at::Tensor> ShardedVocab::Rows(int64_t begin, int64_t n) {
  at::Tensor out = at::empty({n, cols()}, model_->params_const().options());
  const int64_t flat = offset_ + begin * cols();
  HY_RETURN_IF_ERROR(units_->GatherRuns(
      comm_, {{flat, flat + n * cols(), out.data_ptr<float>()}}));
  return out;
}

std::vector<FsdpUnits::FlatRun> ShardedVocab::RunsOf(
    const std::vector<int64_t>& rows,
    const std::function<float*(size_t i)>& data) const {
  std::vector<FsdpUnits::FlatRun> runs;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t flat = offset_ + rows[i] * cols();
    if (!runs.empty() && runs.back().end == flat) {
      runs.back().end += cols();
    } else {
      runs.push_back({flat, flat + cols(), data(i)});
    }
  }
  return runs;
}

Result<at::Tensor> ShardedVocab::LookupRows(const at::Tensor& tokens,
                                            at::Tensor* local) {
  // The ids travel on the host (few); the rows on the model's device.
  const at::Device device = model_->params_const().device();
  const at::Tensor mine = tokens.to(at::kLong).cpu().contiguous().reshape({-1});
  std::vector<uint8_t> bytes(mine.numel() * sizeof(int64_t));
  if (!bytes.empty()) std::memcpy(bytes.data(), mine.data_ptr(), bytes.size());
  HY_ASSIGN_OR_RETURN(auto all, comm_->AllGatherBytes(bytes));
  looked_up_.clear();
  for (const auto& b : all) {
    const size_t n = b.size() / sizeof(int64_t);
    const size_t at = looked_up_.size();
    looked_up_.resize(at + n);
    if (n > 0) std::memcpy(looked_up_.data() + at, b.data(), n * 8);
  }
  std::sort(looked_up_.begin(), looked_up_.end());
  looked_up_.erase(std::unique(looked_up_.begin(), looked_up_.end()),
                   looked_up_.end());
  if (!looked_up_.empty() &&
      (looked_up_.front() < 0 || looked_up_.back() >= rows())) {
    const int64_t bad =
        looked_up_.front() < 0 ? looked_up_.front() : looked_up_.back();
    looked_up_.clear();
    return Status::InvalidArgument("token " + std::to_string(bad) +
                                   " is outside the vocabulary of " +
                                   std::to_string(rows()) + " rows");
  }
  const int64_t u = static_cast<int64_t>(looked_up_.size());
  const auto options = model_->params_const().options();
  at::Tensor values = at::empty({u, cols()}, options);
  float* v = values.data_ptr<float>();
  HY_RETURN_IF_ERROR(units_->GatherRuns(
      comm_, RunsOf(looked_up_, [&](size_t i) { return v + i * cols(); })));
  const at::Tensor sorted = at::tensor(looked_up_, at::kLong).to(device);
  *local = at::searchsorted(sorted, tokens.to(device, at::kLong));
  lookup_grad_ = train_ ? at::zeros({u, cols()}, options) : at::Tensor();
  return values;
}

Result<at::Tensor> ShardedVocab::GradRows(int64_t begin, int64_t n) {
  (void)begin;
  chunk_grad_ = at::zeros({n, cols()}, model_->params_const().options());
  return chunk_grad_;
}

Status ShardedVocab::GradRowsDone(int64_t begin, int64_t n) {
  // The chunk's looked-up rows wait for the lookup's gradient (a tied
  // matrix); the others are reduced now.
  float* g = chunk_grad_.data_ptr<float>();
  std::vector<int64_t> now;
  auto it = std::lower_bound(looked_up_.begin(), looked_up_.end(), begin);
  for (int64_t r = begin; r < begin + n; ++r) {
    if (it != looked_up_.end() && *it == r) {
      lookup_grad_[it - looked_up_.begin()].copy_(chunk_grad_[r - begin]);
      ++it;
    } else {
      now.push_back(r);
    }
  }
  const Status s = units_->ReduceRuns(
      comm_,
      RunsOf(now, [&](size_t i) { return g + (now[i] - begin) * cols(); }),
      piece_());
  chunk_grad_ = at::Tensor();
  return s;
}

std::vector<FsdpUnits::FlatRun> ShardedVocab::LookupGradRuns() {
  if (!lookup_grad_.defined()) return {};
  float* g = lookup_grad_.data_ptr<float>();
  return RunsOf(looked_up_, [&](size_t i) { return g + i * cols(); });
}

}  // namespace hy::trainer
