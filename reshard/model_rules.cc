// ModelRules: parsing, printing and matching of the split rules (see
// model_spec.h). ModelSpec itself is in model_spec.cc.

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <regex>
#include <set>
#include <utility>

#include "hy/reshard/model_spec.h"

namespace hy::reshard {

namespace {

// A rule ready to match: its regex compiled once, its layer decoded.
struct CompiledRule {
  std::regex regex;
  StageRule::Kind kind = StageRule::Kind::kAll;
  int group = 0;  // Capture group giving the layer (kind kLayer).
};

// Parses a whole decimal int (optional leading '-'); false otherwise.
bool ParseInt(std::string_view text, int* out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

std::string RuleName(size_t index, const std::string& pattern) {
  return "rule " + std::to_string(index) + " ('" + pattern + "')";
}

// Decodes rule `index`'s layer: "$N", "first", "last" or "all".
Status DecodeLayer(size_t index, const SplitRule& rule, size_t groups,
                   CompiledRule* out) {
  const std::string& layer = rule.layer;
  if (layer == "first") {
    out->kind = StageRule::Kind::kFirst;
  } else if (layer == "last") {
    out->kind = StageRule::Kind::kLast;
  } else if (layer == "all") {
    out->kind = StageRule::Kind::kAll;
  } else if (layer.size() >= 2 && layer[0] == '$' &&
             ParseInt(std::string_view(layer).substr(1), &out->group) &&
             out->group >= 1 && layer[1] != '0') {
    if (static_cast<size_t>(out->group) > groups) {
      return Status::InvalidArgument(
          RuleName(index, rule.pattern) + ": layer " + layer +
          " names capture group " + std::to_string(out->group) +
          " but the pattern has " + std::to_string(groups));
    }
    out->kind = StageRule::Kind::kLayer;
  } else {
    return Status::InvalidArgument(RuleName(index, rule.pattern) +
                                   ": layer must be $N (N >= 1), " +
                                   "first, last or all, not '" + layer + "'");
  }
  return Status::OK();
}

// "rule I (line L)" for errors found while reading YAML.
std::string YamlRuleName(size_t index, const YAML::Node& node) {
  std::string s = "rule " + std::to_string(index);
  if (node.Mark().line >= 0) {
    s += " (line " + std::to_string(node.Mark().line + 1) + ")";
  }
  return s;
}

// Reads one entry of the `rules` list.
Status ReadRule(size_t index, const YAML::Node& node, SplitRule* rule) {
  const std::string where = "model rules: " + YamlRuleName(index, node);
  if (!node.IsMap()) {
    return Status::InvalidArgument(where +
                                   ": must be a map with keys pattern, "
                                   "tp_dim, layer");
  }
  std::set<std::string> seen;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) {
      return Status::InvalidArgument(where + ": a key is not a string");
    }
    const std::string key = kv.first.Scalar();
    if (!seen.insert(key).second) {
      return Status::InvalidArgument(where + ": repeated key '" + key + "'");
    }
    if (key != "pattern" && key != "tp_dim" && key != "layer") {
      return Status::InvalidArgument(where + ": unknown key '" + key +
                                     "' (expected pattern, tp_dim, layer)");
    }
    if (!kv.second.IsScalar()) {
      return Status::InvalidArgument(where + ": '" + key +
                                     "' must be a scalar");
    }
    const std::string value = kv.second.Scalar();
    if (key == "pattern") {
      rule->pattern = value;
    } else if (key == "layer") {
      rule->layer = value;
    } else if (value == "none") {
      rule->tp_dim = -1;
    } else if (!ParseInt(value, &rule->tp_dim)) {
      return Status::InvalidArgument(where +
                                     ": tp_dim must be an integer >= -1 or "
                                     "none, not '" +
                                     value + "'");
    }
  }
  if (seen.count("pattern") == 0) {
    return Status::InvalidArgument(where + ": missing key 'pattern'");
  }
  return Status::OK();
}

// The shipped rules; see model_spec.h and reshard/rules/llama.yaml.
std::vector<SplitRule> DefaultRules() {
  const std::string kLayer = R"(model\.layers\.(\d+)\.)";
  return {
      {R"(model\.embed_tokens\.weight)", 0, "first"},
      {kLayer + R"(self_attn\.[qkv]_proj\.(weight|bias))", 0, "$1"},
      {kLayer + R"(self_attn\.o_proj\.weight)", 1, "$1"},
      {kLayer + R"(self_attn\.o_proj\.bias)", -1, "$1"},
      {kLayer + R"(self_attn\.rotary_emb\.inv_freq)", -1, "$1"},
      {kLayer + R"(self_attn\.[qk]_norm\.weight)", -1, "$1"},
      {kLayer + R"(mlp\.(gate|up)_proj\.(weight|bias))", 0, "$1"},
      {kLayer + R"(mlp\.down_proj\.weight)", 1, "$1"},
      {kLayer + R"(mlp\.down_proj\.bias)", -1, "$1"},
      {kLayer + R"((input_layernorm|post_attention_layernorm)\.weight)", -1,
       "$1"},
      {R"(model\.norm\.weight)", -1, "last"},
      {R"(lm_head\.weight)", 0, "last"},
      {R"((score|value_head|v_head\.summary)\.(weight|bias))", -1, "last"},
  };
}

}  // namespace

struct ModelRules::Compiled {
  std::vector<CompiledRule> rules;  // One per rules_ entry.
};

ModelRules::ModelRules() : compiled_(std::make_shared<Compiled>()) {}
ModelRules::~ModelRules() = default;
ModelRules::ModelRules(const ModelRules&) = default;
ModelRules& ModelRules::operator=(const ModelRules&) = default;

Result<ModelRules> ModelRules::FromRules(std::vector<SplitRule> rules) {
  auto compiled = std::make_shared<Compiled>();
  compiled->rules.resize(rules.size());
  for (size_t i = 0; i < rules.size(); ++i) {
    const SplitRule& r = rules[i];
    CompiledRule& c = compiled->rules[i];
    if (r.pattern.empty()) {
      return Status::InvalidArgument("rule " + std::to_string(i) +
                                     ": empty pattern");
    }
    try {
      c.regex = std::regex(r.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Status::InvalidArgument(RuleName(i, r.pattern) +
                                     ": bad regex: " + e.what());
    }
    if (r.tp_dim < -1) {
      return Status::InvalidArgument(RuleName(i, r.pattern) +
                                     ": tp_dim must be >= -1, not " +
                                     std::to_string(r.tp_dim));
    }
    HY_RETURN_IF_ERROR(DecodeLayer(i, r, c.regex.mark_count(), &c));
  }
  ModelRules out;
  out.rules_ = std::move(rules);
  out.compiled_ = std::move(compiled);
  return out;
}

Result<ModelRules> ModelRules::ParseYaml(std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("model rules: bad YAML: ") +
                                   e.what());
  }
  if (!root.IsMap()) {
    return Status::InvalidArgument(
        "model rules: expected a map with a 'rules' list at the top");
  }
  YAML::Node list;
  for (const auto& kv : root) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    if (key != "rules") {
      return Status::InvalidArgument("model rules: unknown top-level key '" +
                                     key + "' (expected rules)");
    }
    list = kv.second;
  }
  if (!list.IsDefined() || !list.IsSequence()) {
    return Status::InvalidArgument("model rules: missing 'rules' list");
  }
  std::vector<SplitRule> rules(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    HY_RETURN_IF_ERROR(ReadRule(i, list[i], &rules[i]));
  }
  Result<ModelRules> out = FromRules(std::move(rules));
  if (!out.ok()) return out.status().WithContext("model rules");
  return out;
}

const ModelRules& ModelRules::Default() {
  static const ModelRules* rules = new ModelRules(*FromRules(DefaultRules()));
  return *rules;
}

std::string ModelRules::ToYaml() const {
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key << "rules" << YAML::Value;
  if (rules_.empty()) e << YAML::Flow;
  e << YAML::BeginSeq;
  for (const SplitRule& r : rules_) {
    e << YAML::BeginMap;
    e << YAML::Key << "pattern" << YAML::Value << YAML::SingleQuoted
      << r.pattern;
    e << YAML::Key << "tp_dim" << YAML::Value << r.tp_dim;
    e << YAML::Key << "layer" << YAML::Value << r.layer;
    e << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

Status ModelRules::Match(const std::string& name, int* tp_dim,
                         StageRule* stage) const {
  for (size_t i = 0; i < compiled_->rules.size(); ++i) {
    const CompiledRule& c = compiled_->rules[i];
    std::smatch m;
    if (!std::regex_match(name, m, c.regex)) continue;
    *tp_dim = rules_[i].tp_dim;
    stage->kind = c.kind;
    stage->layer = 0;
    if (c.kind == StageRule::Kind::kLayer) {
      const std::string group =
          m[c.group].matched ? m[c.group].str() : std::string();
      if (!ParseInt(group, &stage->layer) || stage->layer < 0) {
        return Status::InvalidArgument(
            "tensor '" + name + "': " + RuleName(i, rules_[i].pattern) +
            " takes the layer from group " + std::to_string(c.group) +
            ", which captured '" + group + "', not a layer number");
      }
    }
    return Status::OK();
  }
  return Status::NotFound("no model rule matches tensor '" + name + "'");
}

}  // namespace hy::reshard
