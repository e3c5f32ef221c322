// ModelRules (YAML, matching, the shipped rules) and ModelSpec.

#include "hy/reshard/model_spec.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace hy::reshard {
namespace {

using Kind = StageRule::Kind;

void ExpectSameRules(const ModelRules& a, const ModelRules& b) {
  ASSERT_EQ(a.rules().size(), b.rules().size());
  for (size_t i = 0; i < a.rules().size(); ++i) {
    EXPECT_EQ(a.rules()[i].pattern, b.rules()[i].pattern) << "rule " << i;
    EXPECT_EQ(a.rules()[i].tp_dim, b.rules()[i].tp_dim) << "rule " << i;
    EXPECT_EQ(a.rules()[i].layer, b.rules()[i].layer) << "rule " << i;
  }
}

// ParseYaml's error for `yaml`, which must fail with InvalidArgument.
std::string ParseError(const std::string& yaml) {
  Result<ModelRules> r = ModelRules::ParseYaml(yaml);
  EXPECT_FALSE(r.ok()) << yaml;
  if (r.ok()) return "";
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status();
  return std::string(r.status().message());
}

// The parameters of a Hugging Face Llama (or Qwen2 with biases) model.
std::vector<TensorMeta> Llama(int layers, int64_t hidden = 8, int64_t ffn = 16,
                              int64_t vocab = 32, bool qkv_bias = false,
                              bool value_head = false) {
  std::vector<TensorMeta> t;
  auto add = [&t](std::string name, std::vector<int64_t> shape) {
    t.push_back(TensorMeta{std::move(name), DType::kBF16, std::move(shape)});
  };
  add("model.embed_tokens.weight", {vocab, hidden});
  for (int i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* proj : {"q", "k", "v"}) {
      add(p + "self_attn." + proj + "_proj.weight", {hidden, hidden});
      if (qkv_bias) add(p + "self_attn." + proj + "_proj.bias", {hidden});
    }
    add(p + "self_attn.o_proj.weight", {hidden, hidden});
    add(p + "mlp.gate_proj.weight", {ffn, hidden});
    add(p + "mlp.up_proj.weight", {ffn, hidden});
    add(p + "mlp.down_proj.weight", {hidden, ffn});
    add(p + "input_layernorm.weight", {hidden});
    add(p + "post_attention_layernorm.weight", {hidden});
  }
  add("model.norm.weight", {hidden});
  if (value_head) {
    add("value_head.weight", {1, hidden});
  } else {
    add("lm_head.weight", {vocab, hidden});
  }
  return t;
}

TEST(ModelRulesTest, ParsesRulesWithDefaults) {
  auto r = ModelRules::ParseYaml(R"(
# comment
rules:
  - pattern: 'layers\.(\d+)\.w'
    tp_dim: 1
    layer: $1
  - pattern: emb
    layer: first
  - pattern: 'head'
    tp_dim: none
    layer: last
  - pattern: '.*'
)");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rules().size(), 4u);
  EXPECT_EQ(r->rules()[0].pattern, R"(layers\.(\d+)\.w)");
  EXPECT_EQ(r->rules()[0].tp_dim, 1);
  EXPECT_EQ(r->rules()[0].layer, "$1");
  EXPECT_EQ(r->rules()[1].tp_dim, -1);
  EXPECT_EQ(r->rules()[1].layer, "first");
  EXPECT_EQ(r->rules()[2].tp_dim, -1);
  EXPECT_EQ(r->rules()[3].layer, "all");

  int tp = 0;
  StageRule stage;
  ASSERT_TRUE(r->Match("layers.12.w", &tp, &stage).ok());
  EXPECT_EQ(tp, 1);
  EXPECT_EQ(stage.kind, Kind::kLayer);
  EXPECT_EQ(stage.layer, 12);
  ASSERT_TRUE(r->Match("emb", &tp, &stage).ok());
  EXPECT_EQ(stage.kind, Kind::kFirst);
  ASSERT_TRUE(r->Match("head", &tp, &stage).ok());
  EXPECT_EQ(stage.kind, Kind::kLast);
  // The whole name must match; the catch-all takes the rest.
  ASSERT_TRUE(r->Match("xlayers.1.w", &tp, &stage).ok());
  EXPECT_EQ(stage.kind, Kind::kAll);
  EXPECT_EQ(tp, -1);
}

TEST(ModelRulesTest, EmptyListIsNoRules) {
  auto r = ModelRules::ParseYaml("rules: []\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->rules().empty());
  int tp;
  StageRule stage;
  EXPECT_TRUE(r->Match("x", &tp, &stage).IsNotFound());
  EXPECT_TRUE(ModelRules().Match("x", &tp, &stage).IsNotFound());
}

TEST(ModelRulesTest, ErrorsNameTheRuleAndKey) {
  EXPECT_NE(ParseError("rules: [").find("bad YAML"), std::string::npos);
  EXPECT_NE(ParseError("").find("'rules'"), std::string::npos);
  EXPECT_NE(ParseError("- a\n- b\n").find("'rules'"), std::string::npos);
  EXPECT_NE(ParseError("rules: 3\n").find("missing 'rules' list"),
            std::string::npos);
  EXPECT_NE(ParseError("rules: []\nmodel: llama\n")
                .find("unknown top-level key 'model'"),
            std::string::npos);

  const std::string ok = "  - pattern: a\n";
  auto second = [&ok](const std::string& rule) {
    return ParseError("rules:\n" + ok + rule);
  };
  std::string e = second("  - pattern: b\n    tpdim: 0\n");
  EXPECT_NE(e.find("rule 1"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'tpdim'"), std::string::npos) << e;
  EXPECT_NE(e.find("line 3"), std::string::npos) << e;

  e = second("  - tp_dim: 0\n");
  EXPECT_NE(e.find("rule 1"), std::string::npos) << e;
  EXPECT_NE(e.find("missing key 'pattern'"), std::string::npos) << e;

  e = second("  - pattern: b\n    pattern: c\n");
  EXPECT_NE(e.find("repeated key 'pattern'"), std::string::npos) << e;

  e = second("  - just a string\n");
  EXPECT_NE(e.find("rule 1"), std::string::npos) << e;
  EXPECT_NE(e.find("must be a map"), std::string::npos) << e;

  e = second("  - pattern: [a, b]\n");
  EXPECT_NE(e.find("'pattern' must be a scalar"), std::string::npos) << e;

  e = second("  - pattern: b\n    tp_dim: one\n");
  EXPECT_NE(e.find("tp_dim must be an integer"), std::string::npos) << e;
  EXPECT_NE(e.find("'one'"), std::string::npos) << e;

  e = second("  - pattern: b\n    tp_dim: 1.5\n");
  EXPECT_NE(e.find("tp_dim"), std::string::npos) << e;

  e = second("  - pattern: b\n    tp_dim: -2\n");
  EXPECT_NE(e.find("rule 1 ('b')"), std::string::npos) << e;
  EXPECT_NE(e.find("tp_dim must be >= -1"), std::string::npos) << e;

  for (const char* layer : {"middle", "$0", "$", "$x", "$-1", "$01", "3"}) {
    e = second(std::string("  - pattern: '(b)'\n    layer: '") + layer + "'\n");
    EXPECT_NE(e.find("rule 1"), std::string::npos) << layer << ": " << e;
    EXPECT_NE(e.find("layer must be $N"), std::string::npos)
        << layer << ": " << e;
  }

  e = second("  - pattern: 'b(\\d+)'\n    layer: $2\n");
  EXPECT_NE(e.find("capture group 2"), std::string::npos) << e;
  EXPECT_NE(e.find("has 1"), std::string::npos) << e;

  e = second("  - pattern: 'b(('\n");
  EXPECT_NE(e.find("rule 1 ('b((')"), std::string::npos) << e;
  EXPECT_NE(e.find("bad regex"), std::string::npos) << e;

  e = second("  - pattern: ''\n");
  EXPECT_NE(e.find("empty pattern"), std::string::npos) << e;
}

TEST(ModelRulesTest, FromRulesChecks) {
  EXPECT_TRUE(ModelRules::FromRules({{"a", -1, "all"}}).ok());
  EXPECT_TRUE(
      ModelRules::FromRules({{"a(", -1, "all"}}).status().IsInvalidArgument());
  EXPECT_TRUE(
      ModelRules::FromRules({{"a", -3, "all"}}).status().IsInvalidArgument());
  EXPECT_TRUE(
      ModelRules::FromRules({{"a", 0, "$1"}}).status().IsInvalidArgument());
  EXPECT_TRUE(ModelRules::FromRules({{"(a)", 0, "$1"}}).ok());
}

TEST(ModelRulesTest, MatchErrors) {
  auto r = ModelRules::FromRules(
      {{R"(layers\.(\w+)\.w)", 0, "$1"}, {R"(x(\d+)?y)", 0, "$1"}});
  ASSERT_TRUE(r.ok()) << r.status();
  int tp;
  StageRule stage;
  Status s = r->Match("layers.abc.w", &tp, &stage);
  EXPECT_TRUE(s.IsInvalidArgument()) << s;
  EXPECT_NE(s.message().find("layers.abc.w"), std::string::npos) << s;
  EXPECT_NE(s.message().find("'abc'"), std::string::npos) << s;
  // An optional group that did not take part.
  EXPECT_TRUE(r->Match("xy", &tp, &stage).IsInvalidArgument());
  ASSERT_TRUE(r->Match("x7y", &tp, &stage).ok());
  EXPECT_EQ(stage.layer, 7);
  s = r->Match("other", &tp, &stage);
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_NE(s.message().find("'other'"), std::string::npos) << s;
}

TEST(ModelRulesTest, FirstRuleWins) {
  auto r = ModelRules::FromRules(
      {{"a.*", 0, "first"}, {"ab", 1, "last"}, {"b", 1, "last"}});
  ASSERT_TRUE(r.ok());
  int tp;
  StageRule stage;
  ASSERT_TRUE(r->Match("ab", &tp, &stage).ok());
  EXPECT_EQ(tp, 0);
  EXPECT_EQ(stage.kind, Kind::kFirst);
  ASSERT_TRUE(r->Match("b", &tp, &stage).ok());
  EXPECT_EQ(tp, 1);
}

TEST(ModelRulesTest, ToYamlRoundTrips) {
  for (const ModelRules& rules :
       {ModelRules::Default(), ModelRules(),
        *ModelRules::FromRules({{"it's \"quoted\" \\d: #x", 0, "all"},
                                {"(a)|b", -1, "$1"},
                                {"- [x]", 2, "last"}})}) {
    const std::string yaml = rules.ToYaml();
    auto back = ModelRules::ParseYaml(yaml);
    ASSERT_TRUE(back.ok()) << back.status() << "\n" << yaml;
    ExpectSameRules(rules, *back);
    EXPECT_EQ(back->ToYaml(), yaml);
  }
}

TEST(ModelRulesTest, ShippedYamlIsTheDefault) {
  const std::string path =
      std::string(HY_SOURCE_DIR) + "/reshard/rules/llama.yaml";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream text;
  text << in.rdbuf();
  auto rules = ModelRules::ParseYaml(text.str());
  ASSERT_TRUE(rules.ok()) << rules.status();
  ExpectSameRules(*rules, ModelRules::Default());
}

TEST(ModelRulesTest, DefaultMatchesLlamaAndQwen2Names) {
  struct Case {
    const char* name;
    int tp_dim;
    Kind kind;
    int layer;
  };
  const Case cases[] = {
      {"model.embed_tokens.weight", 0, Kind::kFirst, 0},
      {"model.layers.0.self_attn.q_proj.weight", 0, Kind::kLayer, 0},
      {"model.layers.31.self_attn.k_proj.weight", 0, Kind::kLayer, 31},
      {"model.layers.7.self_attn.v_proj.weight", 0, Kind::kLayer, 7},
      {"model.layers.7.self_attn.q_proj.bias", 0, Kind::kLayer, 7},
      {"model.layers.7.self_attn.v_proj.bias", 0, Kind::kLayer, 7},
      {"model.layers.7.self_attn.o_proj.weight", 1, Kind::kLayer, 7},
      {"model.layers.7.self_attn.o_proj.bias", -1, Kind::kLayer, 7},
      {"model.layers.7.self_attn.rotary_emb.inv_freq", -1, Kind::kLayer, 7},
      {"model.layers.79.mlp.gate_proj.weight", 0, Kind::kLayer, 79},
      {"model.layers.79.mlp.up_proj.weight", 0, Kind::kLayer, 79},
      {"model.layers.79.mlp.down_proj.weight", 1, Kind::kLayer, 79},
      {"model.layers.2.input_layernorm.weight", -1, Kind::kLayer, 2},
      {"model.layers.2.post_attention_layernorm.weight", -1, Kind::kLayer, 2},
      {"model.norm.weight", -1, Kind::kLast, 0},
      {"lm_head.weight", 0, Kind::kLast, 0},
      {"score.weight", -1, Kind::kLast, 0},
      {"value_head.weight", -1, Kind::kLast, 0},
      {"value_head.bias", -1, Kind::kLast, 0},
      {"v_head.summary.weight", -1, Kind::kLast, 0},
  };
  const ModelRules& rules = ModelRules::Default();
  for (const Case& c : cases) {
    int tp = -7;
    StageRule stage;
    Status s = rules.Match(c.name, &tp, &stage);
    ASSERT_TRUE(s.ok()) << c.name << ": " << s;
    EXPECT_EQ(tp, c.tp_dim) << c.name;
    EXPECT_EQ(stage.kind, c.kind) << c.name;
    EXPECT_EQ(stage.layer, c.layer) << c.name;
  }
  int tp;
  StageRule stage;
  for (const char* name :
       {"model.layers.x.mlp.up_proj.weight", "model.layers.1.mlp.weight",
        "transformer.h.0.attn.c_attn.weight", "model.embed_tokens.weightx",
        "lm_head.bias"}) {
    EXPECT_TRUE(rules.Match(name, &tp, &stage).IsNotFound()) << name;
  }
}

TEST(ModelRulesTest, CopiesAndThreadsShareCompiledRules) {
  ModelRules copy = ModelRules::Default();
  ModelRules assigned;
  assigned = copy;
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        int tp;
        StageRule stage;
        const std::string name =
            "model.layers." + std::to_string(i) + ".mlp.down_proj.weight";
        Status s = (t % 2 ? copy : assigned).Match(name, &tp, &stage);
        if (!s.ok() || tp != 1 || stage.layer != i) ++bad[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
}

TEST(ModelSpecTest, BuildsLlamaInOrder) {
  const std::vector<TensorMeta> metas = Llama(3, 8, 16, 32, true);
  auto spec = ModelSpec::Build(metas, ModelRules::Default());
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->tensors.size(), metas.size());
  for (size_t i = 0; i < metas.size(); ++i) {
    EXPECT_EQ(spec->tensors[i].meta, metas[i]);
    EXPECT_EQ(spec->Find(metas[i].name), static_cast<int>(i));
  }
  EXPECT_EQ(spec->Find("nope"), -1);
  EXPECT_EQ(spec->NumLayers(), 3);
  const int q = spec->Find("model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(spec->tensors[q].tp_dim, 0);
  EXPECT_EQ(spec->tensors[q].stage.layer, 1);
  EXPECT_EQ(
      spec->tensors[spec->Find("model.layers.2.mlp.down_proj.weight")].tp_dim,
      1);

  int64_t bytes = 0;
  for (const auto& m : metas) bytes += *m.ByteSize();
  EXPECT_EQ(spec->TotalBytes(), bytes);
  EXPECT_EQ(ModelSpec().TotalBytes(), 0);
  EXPECT_EQ(ModelSpec().NumLayers(), 0);
}

TEST(ModelSpecTest, CriticValueHead) {
  auto spec =
      ModelSpec::Build(Llama(2, 8, 16, 32, false, true), ModelRules::Default());
  ASSERT_TRUE(spec.ok()) << spec.status();
  const int v = spec->Find("value_head.weight");
  ASSERT_GE(v, 0);
  EXPECT_EQ(spec->tensors[v].tp_dim, -1);
  EXPECT_EQ(spec->StageOf(v, 2), 1);
}

TEST(ModelSpecTest, StageOf) {
  for (int layers : {1, 2, 3, 4, 5, 7, 8, 32, 80}) {
    auto spec = ModelSpec::Build(Llama(layers), ModelRules::Default());
    ASSERT_TRUE(spec.ok()) << spec.status();
    const int emb = spec->Find("model.embed_tokens.weight");
    const int norm = spec->Find("model.norm.weight");
    const int head = spec->Find("lm_head.weight");
    for (int pp = 1; pp <= std::min(layers, 8); ++pp) {
      EXPECT_EQ(spec->StageOf(emb, pp), 0);
      EXPECT_EQ(spec->StageOf(norm, pp), pp - 1);
      EXPECT_EQ(spec->StageOf(head, pp), pp - 1);
      // Layers go to stages contiguously, every stage gets some, and
      // sizes differ by at most one.
      std::vector<int> per_stage(pp, 0);
      int prev = 0;
      for (int l = 0; l < layers; ++l) {
        const int i = spec->Find("model.layers." + std::to_string(l) +
                                 ".mlp.up_proj.weight");
        const int s = spec->StageOf(i, pp);
        ASSERT_GE(s, prev) << layers << " layers, pp " << pp;
        ASSERT_LT(s, pp);
        // Every tensor of a layer is in the same stage.
        EXPECT_EQ(spec->StageOf(i + 1, pp), s);
        prev = s;
        ++per_stage[s];
      }
      const auto [lo, hi] =
          std::minmax_element(per_stage.begin(), per_stage.end());
      EXPECT_GE(*lo, 1) << layers << " layers, pp " << pp;
      EXPECT_LE(*hi - *lo, 1) << layers << " layers, pp " << pp;
    }
  }
  // 4 layers / 2 stages divide evenly; 5 layers / 2 stages: 3 + 2.
  auto four = *ModelSpec::Build(Llama(4), ModelRules::Default());
  auto five = *ModelSpec::Build(Llama(5), ModelRules::Default());
  auto stage_of_layer = [](const ModelSpec& s, int l, int pp) {
    return s.StageOf(
        s.Find("model.layers." + std::to_string(l) + ".input_layernorm.weight"),
        pp);
  };
  EXPECT_EQ(stage_of_layer(four, 1, 2), 0);
  EXPECT_EQ(stage_of_layer(four, 2, 2), 1);
  EXPECT_EQ(stage_of_layer(five, 2, 2), 0);
  EXPECT_EQ(stage_of_layer(five, 3, 2), 1);
  EXPECT_EQ(stage_of_layer(five, 4, 3), 2);
  EXPECT_EQ(stage_of_layer(five, 1, 3), 0);
  EXPECT_EQ(stage_of_layer(five, 2, 3), 1);

  // "all" is every stage.
  auto rules = *ModelRules::FromRules({{"x", -1, "all"}});
  auto spec = *ModelSpec::Build({TensorMeta{"x", DType::kF32, {2}}}, rules);
  EXPECT_EQ(spec.StageOf(0, 4), -1);
  EXPECT_EQ(spec.NumLayers(), 0);
}

TEST(ModelSpecTest, BuildErrors) {
  const ModelRules& rules = ModelRules::Default();
  std::vector<TensorMeta> metas = Llama(2);
  metas.push_back(metas[3]);
  auto r = ModelSpec::Build(metas, rules);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status();
  EXPECT_NE(r.status().message().find("duplicate tensor name '" +
                                      metas[3].name + "'"),
            std::string::npos)
      << r.status();

  // tp_dim 1 on a 1-d tensor; tp_dim 0 on a scalar.
  r = ModelSpec::Build(
      {TensorMeta{"model.layers.0.mlp.down_proj.weight", DType::kF32, {16}}},
      rules);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status();
  EXPECT_NE(r.status().message().find("tp_dim 1 is not below its rank 1"),
            std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("down_proj"), std::string::npos);
  r = ModelSpec::Build({TensorMeta{"lm_head.weight", DType::kF32, {}}}, rules);
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status();

  r = ModelSpec::Build({TensorMeta{"rotary.cache", DType::kF32, {4}}}, rules);
  EXPECT_TRUE(r.status().IsNotFound()) << r.status();
  EXPECT_NE(r.status().message().find("'rotary.cache'"), std::string::npos);

  r = ModelSpec::Build({TensorMeta{"", DType::kF32, {4}}}, rules);
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status();
  r = ModelSpec::Build({TensorMeta{"lm_head.weight", DType::kF32, {-1, 2}}},
                       rules);
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status();

  // A bad "$N" capture is reported as Match reports it.
  auto bad = *ModelRules::FromRules({{R"(l\.(\w+))", 0, "$1"}});
  r = ModelSpec::Build({TensorMeta{"l.a", DType::kF32, {4}}}, bad);
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status();
}

}  // namespace
}  // namespace hy::reshard
