// VocabMatrix: a vocabulary-sized weight (the embedding, lm_head) as one
// pass of training or scoring sees it, a chunk of rows at a time. For
// Qwen2-0.5B such a matrix is 151,936 x 896 (544 MB in f32): under FSDP by
// layer its rows are gathered a chunk at a time for the output projection
// and only the rows a batch uses for the lookup, and its gradient leaves a
// chunk at a time, so neither the matrix nor its gradient is ever whole on
// a rank. Over a gathered whole model (WholeVocab) the same functions read
// and write the buffer in place, in the same order, so both give the same
// bits (given a BLAS whose results do not depend on the operands'
// addresses: OpenBLAS here; MKL only with MKL_CBWR set).
//
// StreamedEmbedding and StreamedLinear are at::embedding and at::linear
// through a VocabMatrix. The projection's forward and backward visit the
// chunks in order: logits[:, chunk] = x W_c^T; in backward dx += g_c W_c
// and the chunk's gradient g_c^T x is added where GradRows says. The
// lookup's backward index-adds into LookupGrad(). Neither keeps any rows
// between its forward and backward.
//
// Part of hy_trainer_model (LibTorch; ppo/ uses it). Thread-safety: one thread.

#ifndef HY_TRAINER_MODEL_VOCAB_MATRIX_H_
#define HY_TRAINER_MODEL_VOCAB_MATRIX_H_

#include <ATen/ATen.h>

#include "hy/common/result.h"

namespace hy::trainer {

class VocabMatrix {
 public:
  VocabMatrix(int64_t rows, int64_t cols, int64_t chunk_rows);
  virtual ~VocabMatrix() = default;

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t chunk_rows() const { return chunk_rows_; }
  // Whether gradients are collected (a training pass).
  virtual bool train() const = 0;

  // Rows [begin, begin + n) [n, cols] f32. Returns the transport's errors.
  virtual Result<at::Tensor> Rows(int64_t begin, int64_t n) = 0;
  // The rows `tokens` looks up, [u, cols], and the tokens renumbered into
  // them (*local); with train(), their gradient is to be index-added into
  // LookupGrad() [u, cols]. Returns the transport's errors.
  virtual Result<at::Tensor> LookupRows(const at::Tensor& tokens,
                                        at::Tensor* local) = 0;
  virtual at::Tensor LookupGrad() = 0;
  // Where the gradient of rows [begin, begin + n) is added ([n, cols]),
  // and, once it has been, GradRowsDone. Returns the transport's errors.
  virtual Result<at::Tensor> GradRows(int64_t begin, int64_t n) = 0;
  virtual Status GradRowsDone(int64_t begin, int64_t n) = 0;

  // The chunk size for a matrix of `cols` columns when none is asked for:
  // 4M elements (16 MB).
  static int64_t DefaultChunkRows(int64_t cols);

  // The error a backward through this matrix failed with (OK if none).
  const Status& failure() const { return failure_; }
  void set_failure(const Status& s) { failure_ = s; }

 private:
  const int64_t rows_, cols_, chunk_rows_;
  Status failure_;
};

// A matrix that is a [rows, cols] view `w` of a gathered buffer, with its
// gradient (defined only for training) a view `grad` of the same shape.
class WholeVocab : public VocabMatrix {
 public:
  WholeVocab(at::Tensor w, at::Tensor grad, int64_t chunk_rows);
  bool train() const override { return grad_.defined(); }
  Result<at::Tensor> Rows(int64_t begin, int64_t n) override;
  Result<at::Tensor> LookupRows(const at::Tensor& tokens,
                                at::Tensor* local) override;
  at::Tensor LookupGrad() override { return grad_; }
  Result<at::Tensor> GradRows(int64_t begin, int64_t n) override;
  Status GradRowsDone(int64_t, int64_t) override { return Status::OK(); }

 private:
  at::Tensor w_, grad_;
};

// at::embedding(m, tokens); the rows' gradient goes into m->LookupGrad()
// when m->train() and grad mode is on. Returns m's errors.
Result<at::Tensor> StreamedEmbedding(VocabMatrix* m, const at::Tensor& tokens);

// at::linear(x, m) (no bias), x [..., cols] -> [..., rows]. Returns m's
// errors (in backward, they are thrown as std::runtime_error; m keeps the
// Status for the caller).
Result<at::Tensor> StreamedLinear(VocabMatrix* m, const at::Tensor& x);

}  // namespace hy::trainer

#endif  // HY_TRAINER_MODEL_VOCAB_MATRIX_H_
