// ShardedVocab: a vocabulary matrix of an FsdpModel's root unit under FSDP
// by layer (see vocab_matrix.h), never whole on a rank:
//   - the lookup all-gathers the tokens every rank looks up and gathers
//     only those rows (the same on every rank);
//   - the projection gathers a chunk of rows at a time, in forward and again
//     in backward;
//   - the gradient of a chunk's rows is reduced to the ranks that hold them
//     as soon as the chunk's backward has run, except for the looked-up
//     rows (of a tied matrix), whose gradient is kept until the lookup's
//     has been added to it and is then reduced with the root unit's rest
//     (LookupGradRuns).
// Each element's gradient is reduced once, as the sum over ranks in rank
// order of that rank's whole gradient of it: the bits of a whole-buffer
// step (FsdpUnits' reduction).
//
// Every rank calls the same methods in the same order (each is a
// collective); a rank with no rows looks up no tokens and projects zero
// rows.
//
// Internal to hy_trainer_model. Holds pointers to the model, units and comm,
// which outlive it. Thread-safety: one thread.

#ifndef HY_TRAINER_MODEL_FSDP_VOCAB_H_
#define HY_TRAINER_MODEL_FSDP_VOCAB_H_

#include <functional>
#include <vector>

#include "hy/trainer/model/fsdp.h"
#include "hy/trainer/model/fsdp_unit.h"
#include "hy/trainer/model/vocab_matrix.h"

namespace hy::trainer {

class ShardedVocab : public VocabMatrix {
 public:
  // Tensor t of `model` (a [rows, cols] matrix). With `train`, reduced
  // gradients are added into *piece() (called when the first is).
  ShardedVocab(const FsdpModel* model, const FsdpUnits* units, Comm* comm,
               int t, bool train, int64_t chunk_rows,
               std::function<at::Tensor*()> piece);

  bool train() const override { return train_; }
  Result<at::Tensor> Rows(int64_t begin, int64_t n) override;
  // InvalidArgument for a token outside [0, rows) on any rank.
  Result<at::Tensor> LookupRows(const at::Tensor& tokens,
                                at::Tensor* local) override;
  at::Tensor LookupGrad() override { return lookup_grad_; }
  Result<at::Tensor> GradRows(int64_t begin, int64_t n) override;
  Status GradRowsDone(int64_t begin, int64_t n) override;

  // The looked-up rows' gradient as runs of the flat buffer (empty if none
  // were looked up). The data stays valid while this object lives.
  std::vector<FsdpUnits::FlatRun> LookupGradRuns();

 private:
  // Runs of the flat buffer for sorted rows, consecutive rows merged; the
  // data of rows[i] at data(i) (consecutive rows' data must be too).
  std::vector<FsdpUnits::FlatRun> RunsOf(
      const std::vector<int64_t>& rows,
      const std::function<float*(size_t i)>& data) const;

  const FsdpModel* model_;
  const FsdpUnits* units_;
  Comm* comm_;
  const int64_t offset_;  // Of the matrix in the flat buffer.
  const bool train_;
  std::function<at::Tensor*()> piece_;
  std::vector<int64_t> looked_up_;  // Sorted, distinct.
  at::Tensor lookup_grad_;          // [looked_up_.size(), cols]
  at::Tensor chunk_grad_;           // The chunk GradRows handed out.
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_MODEL_FSDP_VOCAB_H_
