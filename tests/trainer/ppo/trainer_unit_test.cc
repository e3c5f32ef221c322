// Single-process tests of the LibTorch trainer's pieces: the clipped PPO
// losses at their boundaries, log-probs and entropy, sampling, the KV-cache
// decode against a full forward, and the response mask.

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "hy/trainer/model/model.h"
#include "hy/trainer/model/vocab_matrix.h"
#include "ppo.h"
#include "rollout.h"

namespace hy::trainer {
namespace {

// d(loss)/d(logp) of the clipped surrogate for one token.
std::pair<double, double> PolicyLossAndGrad(double ratio, double adv,
                                            double eps) {
  at::Tensor logp = at::full({1, 1}, std::log(ratio), at::kDouble);
  logp.requires_grad_(true);
  at::Tensor old = at::zeros({1, 1}, at::kDouble);
  at::Tensor a = at::full({1, 1}, adv, at::kDouble);
  at::Tensor m = at::ones({1, 1}, at::kDouble);
  PolicyLoss pl = ClippedPolicyLoss(logp, old, a, m, eps);
  pl.loss_sum.backward();
  return {pl.loss_sum.item<double>(), logp.grad().item<double>()};
}

TEST(PolicyLossTest, ClipBoundaries) {
  const double eps = 0.2;
  // Positive advantage: ratio above 1 + eps is clipped (no gradient),
  // below it the surrogate is -A * ratio with gradient -A * ratio.
  auto [l1, g1] = PolicyLossAndGrad(1.3, 2.0, eps);
  EXPECT_NEAR(l1, -2.0 * 1.2, 1e-12);
  EXPECT_EQ(g1, 0.0);
  auto [l2, g2] = PolicyLossAndGrad(1.1, 2.0, eps);
  EXPECT_NEAR(l2, -2.0 * 1.1, 1e-12);
  EXPECT_NEAR(g2, -2.0 * 1.1, 1e-12);
  // A ratio far below 1 - eps with A > 0 is not clipped (pessimistic max).
  auto [l3, g3] = PolicyLossAndGrad(0.5, 2.0, eps);
  EXPECT_NEAR(l3, -2.0 * 0.5, 1e-12);
  EXPECT_NEAR(g3, -2.0 * 0.5, 1e-12);
  // Negative advantage: below 1 - eps clipped, above 1 + eps not.
  auto [l4, g4] = PolicyLossAndGrad(0.7, -1.0, eps);
  EXPECT_NEAR(l4, 0.8, 1e-12);
  EXPECT_EQ(g4, 0.0);
  auto [l5, g5] = PolicyLossAndGrad(1.5, -1.0, eps);
  EXPECT_NEAR(l5, 1.5, 1e-12);
  EXPECT_NEAR(g5, 1.5, 1e-12);
  // Exactly at the boundary both branches agree.
  auto [l6, g6] = PolicyLossAndGrad(1.2, 1.0, eps);
  EXPECT_NEAR(l6, -1.2, 1e-12);
  (void)g6;
}

TEST(PolicyLossTest, MaskAndClipFraction) {
  at::Tensor logp =
      at::log(at::tensor({1.5, 1.0, 0.5, 2.0}, at::kDouble)).view({2, 2});
  at::Tensor old = at::zeros({2, 2}, at::kDouble);
  at::Tensor adv = at::ones({2, 2}, at::kDouble);
  at::Tensor mask = at::tensor({1.0, 1.0, 1.0, 0.0}, at::kDouble).view({2, 2});
  PolicyLoss pl = ClippedPolicyLoss(logp, old, adv, mask, 0.2);
  // Tokens: 1.5 -> clipped to 1.2; 1.0; 0.5 unclipped; 2.0 masked.
  EXPECT_NEAR(pl.loss_sum.item<double>(), -(1.2 + 1.0 + 0.5), 1e-12);
  EXPECT_EQ(pl.clipped, 1.0);
}

// Truncated importance sampling (actor.tis_cap): each token's loss and
// gradient scale by min(pi_old / pi_engine, cap); the weights carry no
// gradient and the clip statistics stay unweighted.
TEST(PolicyLossTest, TruncatedImportanceWeights) {
  at::Tensor old = at::log(at::tensor({0.5, 0.2, 0.1}, at::kDouble)).view({1, 3});
  at::Tensor eng = at::log(at::tensor({0.25, 0.4, 0.001}, at::kDouble)).view({1, 3});
  at::Tensor w = TruncatedIsWeights(old, eng, 5.0);
  EXPECT_NEAR(w[0][0].item<double>(), 2.0, 1e-12);
  EXPECT_NEAR(w[0][1].item<double>(), 0.5, 1e-12);
  EXPECT_NEAR(w[0][2].item<double>(), 5.0, 1e-12);  // 100, truncated.
  at::Tensor logp = old.clone().requires_grad_(true);  // ratio 1
  at::Tensor adv = at::ones({1, 3}, at::kDouble);
  at::Tensor mask = at::tensor({1.0, 1.0, 0.0}, at::kDouble).view({1, 3});
  PolicyLoss pl = ClippedPolicyLoss(logp, old, adv, mask, 0.2, w);
  EXPECT_NEAR(pl.loss_sum.item<double>(), -(2.0 + 0.5), 1e-12);
  pl.loss_sum.backward();
  EXPECT_NEAR(logp.grad()[0][0].item<double>(), -2.0, 1e-12);
  EXPECT_NEAR(logp.grad()[0][1].item<double>(), -0.5, 1e-12);
  EXPECT_EQ(logp.grad()[0][2].item<double>(), 0.0);
  EXPECT_EQ(pl.clipped, 0.0);
}

TEST(ValueLossTest, ClippedAgainstOldValues) {
  at::Tensor v = at::tensor({1.0, 0.0}, at::kDouble).view({1, 2});
  at::Tensor old = at::tensor({0.0, 0.0}, at::kDouble).view({1, 2});
  at::Tensor ret = at::tensor({0.0, 1.0}, at::kDouble).view({1, 2});
  at::Tensor mask = at::ones({1, 2}, at::kDouble);
  // Token 0: unclipped error 1, clipped value 0.5 -> error 0.5; max = 1.
  // Token 1: error 1 both ways.
  EXPECT_NEAR(ClippedValueLoss(v, old, ret, mask, 0.5).item<double>(),
              0.5 * (1.0 + 1.0), 1e-12);
  v = at::tensor({0.2, 0.0}, at::kDouble).view({1, 2});
  ret = at::tensor({1.0, 0.0}, at::kDouble).view({1, 2});
  // Token 0: (0.2 - 1)^2 = 0.64 both ways (inside the clip range).
  EXPECT_NEAR(ClippedValueLoss(v, old, ret, mask, 0.5).item<double>(),
              0.5 * 0.64, 1e-12);
}

TEST(LogProbTest, NormalisedOverTheWholeVocabWithEntropy) {
  const int64_t vocab = 37;  // Any size: nothing assumes the task's 18.
  at::Tensor logits = at::randn({2, 3, vocab}, at::kFloat);
  at::Tensor entropy;
  double total = 0;
  for (int64_t id = 0; id < vocab; ++id) {
    at::Tensor lp = TokenLogProbs(logits, at::full({2, 3}, id, at::kLong), 0.7,
                                  id == 0 ? &entropy : nullptr);
    total += lp[1][2].exp().item<double>();
  }
  EXPECT_NEAR(total, 1.0, 1e-5);
  at::Tensor p = at::softmax(logits[1][2] / 0.7, 0);
  EXPECT_NEAR(entropy[1][2].item<double>(), -(p * p.log()).sum().item<double>(),
              1e-5);
}

// Temperature 0 (validation) is greedy: the largest logit whatever the
// draw, the lowest id among equal ones.
TEST(SampleTest, TemperatureZeroIsArgmax) {
  std::vector<float> logits(kVocabSize, 0.0f);
  logits[5] = 0.5f;
  logits[11] = 0.5f;
  logits[2] = -1.0f;
  for (uint64_t s = 0; s < 20; ++s) {
    EXPECT_EQ(SampleToken(logits.data(), kVocabSize, 0.0, 0,
                          s * 0x9E3779B97F4A7C15ull),
              5);
  }
  logits[11] = 0.6f;
  EXPECT_EQ(SampleToken(logits.data(), kVocabSize, 0.0, 3, 7), 11);
}

TEST(SampleTest, DeterministicTopKAndFrequencies) {
  std::vector<float> logits(kVocabSize, 0.0f);
  logits[3] = 2.0f;
  logits[7] = 1.0f;
  EXPECT_EQ(SampleToken(logits.data(), kVocabSize, 1.0, 0, 42),
            SampleToken(logits.data(), kVocabSize, 1.0, 0, 42));
  for (uint64_t s = 0; s < 50; ++s) {
    EXPECT_EQ(SampleToken(logits.data(), kVocabSize, 1.0, 1,
                          s * 0x9E3779B97F4A7C15ull),
              3);
    const int t = SampleToken(logits.data(), kVocabSize, 1.0, 2,
                              s * 0x9E3779B97F4A7C15ull);
    EXPECT_TRUE(t == 3 || t == 7);
  }
  // Frequencies follow softmax(logits) (loose 5-sigma bounds).
  const int n = 20000;
  std::map<int, int> count;
  uint64_t state = 1;
  for (int i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    ++count[SampleToken(logits.data(), kVocabSize, 1.0, 0, state)];
  }
  const double z = std::exp(2.0) + std::exp(1.0) + (kVocabSize - 2);
  for (int id : {3, 7, 0}) {
    const double p = (id == 3   ? std::exp(2.0)
                      : id == 7 ? std::exp(1.0)
                                : 1) /
                     z;
    EXPECT_NEAR(count[id] / double{n}, p, 5 * std::sqrt(p * (1 - p) / n))
        << "token " << id;
  }
}

TEST(RolloutTest, ResponseMaskIncludesFirstEos) {
  at::Tensor r =
      at::tensor({1, 2, kEos, kPad, 4, kEos, 5, 6}, at::kLong).view({2, 4});
  at::Tensor m = ResponseMask(r, TokenSpec{});
  EXPECT_TRUE(at::equal(
      m, at::tensor({1.f, 1.f, 1.f, 0.f, 1.f, 1.f, 0.f, 0.f}).view({2, 4})));
}

TEST(ModelTest, KvCacheDecodeEqualsFullForward) {
  ModelConfig config;
  config.hidden_size = 32;
  config.intermediate_size = 48;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  std::map<std::string, at::Tensor> weights;
  for (const auto& m : ModelTensors(config, ModelRole::kActor)) {
    weights[m.name] = InitTensor(9, m.name, m.shape) * 10;  // Sharper.
  }
  Weights w = BindWeights(config, ModelRole::kActor, [&](const std::string& n) {
                return weights[n];
              }).value();
  // Two left-padded prompts, then 3 decoded tokens.
  std::vector<Prompt> samples = {{0, Generate(TaskConfig(), 1, 0, 0).prompt},
                                 {1, Generate(TaskConfig(), 1, 0, 1).prompt}};
  samples[1].tokens.resize(3);  // Different lengths.
  PromptBatch prompts = BuildPrompts(samples, 8, TokenSpec{});
  RolloutConfig rc;
  rc.response_length = 4;
  at::Tensor responses = GenerateResponses(config, w, TpContext{}, prompts,
                                           {0, 1}, 5, 0, rc, TokenSpec{})
                             .value();
  // Re-score the sequences with one full forward: the sampled tokens must
  // be drawable again from the same logits, i.e. decoding saw the same
  // distribution. Compare logits directly.
  at::Tensor mask = at::ones({2, 4}, at::kFloat);
  Sequences seq = BuildSequences(prompts, responses, mask);
  at::NoGradGuard no_grad;
  at::Tensor full = LmHead(w,
                           Trunk(config, w, seq.tokens, seq.positions,
                                 seq.valid, TpContext{}, nullptr)
                               .value(),
                           TpContext{})
                        .value();
  KvCache cache = MakeKvCache(config, 1, 2, 12);
  at::Tensor key_valid = seq.valid;
  at::Tensor h = Trunk(config, w, prompts.tokens, seq.positions.narrow(1, 0, 8),
                       key_valid.narrow(1, 0, 8), TpContext{}, &cache)
                     .value();
  at::Tensor step_logits = LmHead(w, h, TpContext{}).value();
  EXPECT_TRUE(at::allclose(step_logits.narrow(1, 7, 1), full.narrow(1, 7, 1),
                           1e-4, 1e-5));
  for (int t = 0; t < 3; ++t) {
    h = Trunk(config, w, responses.narrow(1, t, 1),
              seq.positions.narrow(1, 8 + t, 1), key_valid.narrow(1, 0, 9 + t),
              TpContext{}, &cache)
            .value();
    step_logits = LmHead(w, h, TpContext{}).value();
    EXPECT_TRUE(at::allclose(step_logits, full.narrow(1, 8 + t, 1), 1e-4, 1e-5))
        << "decode step " << t;
  }
}

// A model small enough for exact gradient comparisons.
ModelConfig TinyConfig() {
  ModelConfig config;
  config.hidden_size = 32;
  config.intermediate_size = 48;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  return config;
}

// Every tensor of `metas`, initialised and jittered, in one flat buffer.
at::Tensor RandomFlat(const std::vector<TensorMeta>& metas, uint64_t seed) {
  std::vector<at::Tensor> parts;
  for (const auto& m : metas) {
    parts.push_back(InitTensor(seed, m.name, m.shape).flatten() +
                    0.01 * at::randn({m.NumElements().value()}));
  }
  return at::cat(parts);
}

// Two left-padded prompts of different lengths.
PromptBatch TwoPrompts() {
  std::vector<Prompt> samples = {{0, Generate(TaskConfig(), 1, 0, 0).prompt},
                                 {1, Generate(TaskConfig(), 1, 0, 1).prompt}};
  samples[1].tokens.resize(3);
  return BuildPrompts(samples, 8, TokenSpec{});
}

// Activation checkpointing recomputes each layer in backward: the loss and
// every weight's gradient (flowing into one flat buffer, as under FSDP) are
// exactly those of the plain forward, for each family's layer (Qwen2's
// q/k/v biases, Qwen3's q/k norms).
TEST(ModelTest, GradientCheckpointingGivesTheSameGradients) {
  for (std::string_view arch : {kLlamaArch, kQwen2Arch, kQwen3Arch}) {
    ModelConfig config = TinyConfig();
    config.architecture = std::string(arch);
    config.num_layers = 3;
    const auto metas = ModelTensors(config, ModelRole::kActor);
    const at::Tensor flat = RandomFlat(metas, 4);
    const PromptBatch prompts = TwoPrompts();
    at::Tensor positions =
        (prompts.valid.to(at::kLong).cumsum(1) - 1).clamp_min(0);
    auto run = [&](bool recompute) {
      at::Tensor full = flat.clone().requires_grad_(true);
      std::map<std::string, at::Tensor> views;
      int64_t at = 0;
      for (const auto& m : metas) {
        const int64_t n = m.NumElements().value();
        views[m.name] = full.narrow(0, at, n).view(m.shape);
        at += n;
      }
      Weights w =
          BindWeights(config, ModelRole::kActor, [&](const std::string& n) {
            return views[n];
          }).value();
      at::Tensor hidden = Trunk(config, w, prompts.tokens, positions,
                                prompts.valid, TpContext{}, nullptr, recompute)
                              .value();
      at::Tensor loss = LmHead(w, hidden, TpContext{}).value().pow(2).mean();
      // Checkpointed layers are single nodes of the graph.
      int layer_nodes = 0;
      std::vector<torch::autograd::Node*> todo{loss.grad_fn().get()};
      std::set<torch::autograd::Node*> seen;
      while (!todo.empty()) {
        torch::autograd::Node* node = todo.back();
        todo.pop_back();
        if (node == nullptr || !seen.insert(node).second) continue;
        layer_nodes += node->name().find("LayerFunction") != std::string::npos;
        for (const auto& e : node->next_edges())
          todo.push_back(e.function.get());
      }
      EXPECT_EQ(layer_nodes, recompute ? config.num_layers : 0) << arch;
      loss.backward();
      return std::make_pair(loss.detach(), full.grad());
    };
    const auto plain = run(false);
    const auto checkpointed = run(true);
    EXPECT_TRUE(at::equal(plain.first, checkpointed.first)) << arch;
    ASSERT_TRUE(checkpointed.second.defined()) << arch;
    EXPECT_GT(plain.second.abs().sum().item<double>(), 0) << arch;
    EXPECT_TRUE(at::equal(plain.second, checkpointed.second))
        << arch << ": max difference "
        << (plain.second - checkpointed.second).abs().max().item<double>();
  }
}

// A VocabMatrix over a whole [rows, cols] matrix that hands out copies of
// its rows and keeps them, so a test sees whether anyone else holds one.
class CopyingVocab : public VocabMatrix {
 public:
  CopyingVocab(at::Tensor w, at::Tensor grad, int64_t chunk_rows)
      : VocabMatrix(w.size(0), w.size(1), chunk_rows),
        whole_(w, grad, chunk_rows) {}
  bool train() const override { return whole_.train(); }
  Result<at::Tensor> Rows(int64_t begin, int64_t n) override {
    if (--rows_left_ < 0) return Status::Unavailable("rank 1 is gone");
    copies_.push_back(whole_.Rows(begin, n).value().clone());
    return copies_.back();
  }
  Result<at::Tensor> LookupRows(const at::Tensor& tokens,
                                at::Tensor* local) override {
    copies_.push_back(whole_.LookupRows(tokens, local).value().clone());
    return copies_.back();
  }
  at::Tensor LookupGrad() override { return whole_.LookupGrad(); }
  Result<at::Tensor> GradRows(int64_t begin, int64_t n) override {
    return whole_.GradRows(begin, n);
  }
  Status GradRowsDone(int64_t, int64_t) override { return Status::OK(); }
  // How many of the copies handed out someone besides this object holds.
  int Held() const {
    int held = 0;
    for (const auto& c : copies_) held += c.use_count() > 1;
    return held;
  }
  void FailAfter(int calls) { rows_left_ = calls; }

 private:
  int rows_left_ = 1 << 30;
  WholeVocab whole_;
  std::vector<at::Tensor> copies_;
};

// The embedding and the output projection through a VocabMatrix, a chunk
// of rows at a time, give autograd's own gradients (tied or not, for any
// chunk size) up to the order of float additions, added straight into the
// matrix's gradient.
TEST(ModelTest, StreamedVocabularyMatricesGiveAutogradsGradients) {
  for (bool tied : {false, true}) {
    for (int64_t chunk : {int64_t{1}, int64_t{5}, int64_t{0}}) {
      ModelConfig config = TinyConfig();
      config.tie_word_embeddings = tied;
      const auto metas = ModelTensors(config, ModelRole::kActor);
      const at::Tensor flat = RandomFlat(metas, 5);
      const PromptBatch prompts = TwoPrompts();
      at::Tensor positions =
          (prompts.valid.to(at::kLong).cumsum(1) - 1).clamp_min(0);
      auto run = [&](bool streamed) {
        at::Tensor grad = at::zeros_like(flat);
        std::map<std::string, at::Tensor> leaves;
        std::map<std::string, at::Tensor> slots;
        int64_t at = 0;
        for (const auto& m : metas) {
          const int64_t n = m.NumElements().value();
          leaves[m.name] =
              flat.narrow(0, at, n).view(m.shape).detach().requires_grad_(true);
          slots[m.name] = grad.narrow(0, at, n).view(m.shape);
          at += n;
        }
        Weights w =
            BindWeights(config, ModelRole::kActor, [&](const std::string& n) {
              return leaves[n];
            }).value();
        std::unique_ptr<VocabMatrix> embed, head;
        if (streamed) {
          const std::string e = "model.embed_tokens.weight";
          embed =
              std::make_unique<WholeVocab>(leaves[e].detach(), slots[e], chunk);
          w.embed_rows = embed.get();
          w.head_rows = embed.get();
          if (!tied) {
            head =
                std::make_unique<WholeVocab>(leaves["lm_head.weight"].detach(),
                                             slots["lm_head.weight"], chunk);
            w.head_rows = head.get();
          }
        }
        at::Tensor hidden = Trunk(config, w, prompts.tokens, positions,
                                  prompts.valid, TpContext{}, nullptr)
                                .value();
        LmHead(w, hidden, TpContext{}).value().pow(2).mean().backward();
        for (auto& [name, leaf] : leaves) {
          if (leaf.grad().defined()) slots[name].add_(leaf.grad());
        }
        return grad;
      };
      const at::Tensor plain = run(false);
      const at::Tensor streamed = run(true);
      EXPECT_GT(plain.abs().sum().item<double>(), 0) << "tied " << tied;
      EXPECT_TRUE(at::allclose(plain, streamed, 1e-5, 1e-7))
          << "tied " << tied << ", chunk " << chunk << ": max difference "
          << (plain - streamed).abs().max().item<double>();
    }
  }
}

// Neither function keeps the rows it was given from its forward to its
// backward (FSDP by layer gathers them again there), and a failure to get
// rows in backward comes back as the matrix's Status.
TEST(ModelTest, StreamedVocabularyFunctionsKeepNoRows) {
  const int64_t vocab = 32, hidden = 8;
  const at::Tensor w = at::randn({vocab, hidden});
  at::Tensor grad = at::zeros_like(w);
  CopyingVocab m(w, grad, 5);
  const at::Tensor tokens = at::randint(vocab, {2, 5}, at::kLong);
  at::Tensor x = StreamedEmbedding(&m, tokens).value();
  at::Tensor loss = StreamedLinear(&m, x.tanh()).value().pow(2).sum();
  EXPECT_EQ(m.Held(), 0);
  loss.backward();
  EXPECT_EQ(m.Held(), 0);
  EXPECT_GT(grad.abs().sum().item<double>(), 0);
  // The same through the whole matrix: the same gradient.
  at::Tensor grad2 = at::zeros_like(w);
  WholeVocab whole(w, grad2, 5);
  StreamedLinear(&whole, StreamedEmbedding(&whole, tokens).value().tanh())
      .value()
      .pow(2)
      .sum()
      .backward();
  EXPECT_TRUE(at::equal(grad, grad2));

  // Rows that cannot be had in backward: the error, kept by the matrix.
  CopyingVocab failing(w, at::zeros_like(w), 5);
  at::Tensor loss3 =
      StreamedLinear(&failing, x.detach().requires_grad_(true)).value().sum();
  failing.FailAfter(2);
  EXPECT_ANY_THROW(loss3.backward());
  EXPECT_EQ(failing.failure().code(), StatusCode::kUnavailable)
      << failing.failure().ToString();
}

}  // namespace
}  // namespace hy::trainer
