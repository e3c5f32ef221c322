// ModelSpec: the tensors of a model (name, dtype, global shape) and, per
// tensor, how a layout may split it: its tensor-parallel dimension and the
// pipeline stage it belongs to. Built from the tensors' metadata and
// ModelRules, a list of name patterns read from YAML:
//
//   # First matching rule wins; a tensor no rule matches is an error.
//   rules:
//     - pattern: 'model\.layers\.(\d+)\.self_attn\.[qkv]_proj\.weight'
//       tp_dim: 0          # column-parallel; 1 = row-parallel; none = -1
//       layer: $1          # the layer index from capture group 1, or
//                          # first | last | all (every stage holds it)
//
// Patterns are ECMAScript regular expressions matched against the whole
// name. DefaultRules() covers Llama / Qwen2 parameter names as Hugging Face
// spells them (embeddings vocab-parallel on dim 0, q/k/v/gate/up
// column-parallel, o/down row-parallel, norms replicated, lm_head on dim 0,
// a critic's value head replicated in the last stage).
//
// Pipeline stages: with L layers (1 + the largest layer index seen) and pp
// stages, layer i belongs to stage i * pp / L (contiguous, as even as
// possible); "first" is stage 0, "last" stage pp - 1, "all" every stage.
//
// Thread-safety: plain values; ModelRules::Match is const and safe to call
// from many threads.

#ifndef HY_RESHARD_MODEL_SPEC_H_
#define HY_RESHARD_MODEL_SPEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/tensor_meta.h"

namespace hy::reshard {

// Where in the pipeline a tensor lives.
struct StageRule {
  enum class Kind : uint8_t { kLayer, kFirst, kLast, kAll };
  Kind kind = Kind::kAll;
  int layer = 0;  // Only for kLayer.
};

struct SplitRule {
  std::string pattern;  // Regex over the whole tensor name.
  int tp_dim = -1;      // -1: replicated across TP.
  // "$N" (capture group N gives the layer), "first", "last" or "all".
  std::string layer = "all";
};

class ModelRules {
 public:
  ModelRules();  // No rules.
  ~ModelRules();
  ModelRules(const ModelRules&);
  ModelRules& operator=(const ModelRules&);

  // Returns InvalidArgument for YAML that does not parse, a missing
  // `rules` list, an unknown key, a bad regex, a tp_dim < -1 or a bad
  // layer; the message names the rule.
  static Result<ModelRules> ParseYaml(std::string_view yaml);
  static Result<ModelRules> FromRules(std::vector<SplitRule> rules);
  // The shipped Llama / Qwen2 rules.
  static const ModelRules& Default();

  const std::vector<SplitRule>& rules() const { return rules_; }
  // YAML that ParseYaml reads back to the same rules.
  std::string ToYaml() const;

  // The split of tensor `name`. Returns NotFound, naming the tensor, if no
  // rule matches; InvalidArgument if its "$N" group is missing or not a
  // number.
  Status Match(const std::string& name, int* tp_dim, StageRule* stage) const;

 private:
  struct Compiled;
  std::vector<SplitRule> rules_;
  std::shared_ptr<const Compiled> compiled_;
};

struct TensorSpec {
  TensorMeta meta;  // name, dtype, global shape
  int tp_dim = -1;
  StageRule stage;
};

struct ModelSpec {
  // Applies `rules` to `tensors` (order kept: it is the FSDP flattening
  // order). Returns InvalidArgument for a duplicate name, a tp_dim not
  // below the tensor's rank, or NotFound for a tensor no rule covers.
  static Result<ModelSpec> Build(const std::vector<TensorMeta>& tensors,
                                 const ModelRules& rules);

  // Index of `name` in tensors, or -1.
  int Find(const std::string& name) const;
  // 1 + the largest layer index (0 if no per-layer tensor).
  int NumLayers() const;
  // The stage of tensor i under pp stages, or -1 for "every stage".
  int StageOf(int i, int pp) const;
  // Total bytes of all tensors.
  int64_t TotalBytes() const;

  std::vector<TensorSpec> tensors;
};

}  // namespace hy::reshard

#endif  // HY_RESHARD_MODEL_SPEC_H_
