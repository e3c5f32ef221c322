#include "hy/trainer/model/vocab_matrix.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace hy::trainer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A fresh zero-element leaf that requires grad, so that a graph node is
// made for a function whose other inputs need no gradient.
at::Tensor Anchor() { return at::empty({0}).requires_grad_(true); }

VocabMatrix* MatrixOf(AutogradContext* ctx) {
  return reinterpret_cast<VocabMatrix*>(ctx->saved_data["m"].toInt());
}

// The lookup's backward index-adds the rows' gradient into the matrix's
// lookup gradient, in token order (as at::embedding's backward would).
struct EmbeddingFunction : public torch::autograd::Function<EmbeddingFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& /*anchor*/,
                            const at::Tensor& rows, const at::Tensor& local,
                            const at::Tensor& into) {
    ctx->save_for_backward({local});
    ctx->saved_data["into"] = into;
    at::NoGradGuard no_grad;
    return at::embedding(rows, local);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor local = ctx->get_saved_variables()[0];
    at::Tensor into = ctx->saved_data["into"].toTensor();
    into.index_add_(0, local.reshape({-1}),
                    grads[0].reshape({-1, into.size(1)}));
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor Unwrap(VocabMatrix* m, Result<at::Tensor> r) {
  if (!r.ok()) {
    m->set_failure(r.status());
    throw std::runtime_error(r.status().ToString());
  }
  return std::move(r).value();
}

// logits [M, rows] of x2d [M, cols], a chunk of rows at a time.
Result<at::Tensor> ChunkedLogits(VocabMatrix* m, const at::Tensor& x2d) {
  at::Tensor out =
      at::empty({x2d.size(0), m->rows()}, x2d.options().dtype(at::kFloat));
  for (int64_t b = 0; b < m->rows(); b += m->chunk_rows()) {
    const int64_t n = std::min(m->chunk_rows(), m->rows() - b);
    HY_ASSIGN_OR_RETURN(at::Tensor w, m->Rows(b, n));
    out.narrow(1, b, n).copy_(at::mm(x2d, w.t()));
  }
  return out;
}

struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& /*anchor*/,
                            const at::Tensor& x2d, int64_t matrix) {
    ctx->save_for_backward({x2d});
    ctx->saved_data["m"] = matrix;
    at::NoGradGuard no_grad;
    auto* m = reinterpret_cast<VocabMatrix*>(matrix);
    return Unwrap(m, ChunkedLogits(m, x2d));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    VocabMatrix* m = MatrixOf(ctx);
    const at::Tensor x2d = ctx->get_saved_variables()[0];
    const at::Tensor g = grads[0].contiguous();
    at::Tensor dx;
    if (x2d.requires_grad()) dx = at::zeros_like(x2d);
    for (int64_t b = 0; b < m->rows(); b += m->chunk_rows()) {
      const int64_t n = std::min(m->chunk_rows(), m->rows() - b);
      const at::Tensor g_c = g.narrow(1, b, n);
      // Fetched even when x needs no gradient: every rank makes the same
      // collectives (FsdpPass::Idle gathers each chunk here).
      const at::Tensor w = Unwrap(m, m->Rows(b, n));
      if (dx.defined()) dx.addmm_(g_c, w);
      Unwrap(m, m->GradRows(b, n)).addmm_(g_c.t(), x2d);
      const Status s = m->GradRowsDone(b, n);
      if (!s.ok()) {
        m->set_failure(s);
        throw std::runtime_error(s.ToString());
      }
    }
    return {at::Tensor(), dx, at::Tensor()};
  }
};

}  // namespace

VocabMatrix::VocabMatrix(int64_t rows, int64_t cols, int64_t chunk_rows)
    : rows_(rows),
      cols_(cols),
      chunk_rows_(std::max<int64_t>(
          1, chunk_rows > 0 ? chunk_rows : DefaultChunkRows(cols))) {}

int64_t VocabMatrix::DefaultChunkRows(int64_t cols) {
  return std::max<int64_t>(1, (int64_t{4} << 20) / std::max<int64_t>(1, cols));
}

WholeVocab::WholeVocab(at::Tensor w, at::Tensor grad, int64_t chunk_rows)
    : VocabMatrix(w.size(0), w.size(1), chunk_rows),
      w_(std::move(w)),
      grad_(std::move(grad)) {}

Result<at::Tensor> WholeVocab::Rows(int64_t begin, int64_t n) {
  return w_.narrow(0, begin, n);
}

Result<at::Tensor> WholeVocab::LookupRows(const at::Tensor& tokens,
                                          at::Tensor* local) {
  *local = tokens;
  return w_;
}

Result<at::Tensor> WholeVocab::GradRows(int64_t begin, int64_t n) {
  return grad_.narrow(0, begin, n);
}

Result<at::Tensor> StreamedEmbedding(VocabMatrix* m, const at::Tensor& tokens) {
  at::Tensor local;
  HY_ASSIGN_OR_RETURN(at::Tensor rows, m->LookupRows(tokens, &local));
  if (!m->train() || !at::GradMode::is_enabled()) {
    return at::embedding(rows, local);
  }
  return EmbeddingFunction::apply(Anchor(), rows, local, m->LookupGrad());
}

Result<at::Tensor> StreamedLinear(VocabMatrix* m, const at::Tensor& x) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = m->rows();
  const at::Tensor x2d = x.reshape({-1, m->cols()});
  if (!m->train() || !at::GradMode::is_enabled()) {
    HY_ASSIGN_OR_RETURN(at::Tensor logits, ChunkedLogits(m, x2d));
    return logits.view(shape);
  }
  try {
    return LinearFunction::apply(Anchor(), x2d, reinterpret_cast<int64_t>(m))
        .view(shape);
  } catch (const std::exception& e) {
    if (!m->failure().ok()) return m->failure();
    return Status::Internal(std::string("output projection: ") + e.what());
  }
}

}  // namespace hy::trainer
