// Inputs of hyctl plan and reshard: model spec files, a stored version's
// tensors in model order, and the split rules to apply (see
// reshard_command.h for the order rules).
//
// Thread-safety: plain functions; the Store calls are thread-safe.

#ifndef HY_CLI_LAYOUT_RESHARD_INPUT_H_
#define HY_CLI_LAYOUT_RESHARD_INPUT_H_

#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/tensor_meta.h"
#include "hy/reshard/model_spec.h"
#include "hy/reshard/stored_version.h"
#include "hy/statestore/store.h"

namespace hy::cli {

// Moved to the reshard library (stored_version.h); named here too.
using reshard::NaturalLess;
using reshard::StoredTensors;
using reshard::TensorOrderJson;

// Reads the tensors of a model spec file, in file order: a safetensors file
// (by its .safetensors suffix; its header only, in natural order), else a
// JSON array [{"name": ..., "dtype": "bf16", "shape": [...]}, ...] (dtype
// as safetensors spells it, any case). Returns NotFound if the file does not
// exist, InvalidArgument naming the entry for malformed JSON.
Result<std::vector<TensorMeta>> ReadModelSpecFile(const std::string& path);

// The rules to apply: the YAML file `rules_file` if not empty, else the
// `recorded` YAML of a commit record if not empty, else the shipped
// defaults. Returns NotFound for a missing file, InvalidArgument (naming
// the file, or "recorded") for rules that do not parse.
Result<reshard::ModelRules> ChooseRules(const std::string& rules_file,
                                        const std::string& recorded);

// A rule-matching error ("no model rule matches tensor ...") as an
// InvalidArgument with what to do: a trainer run's
// tensor (actor/..., critic/..., reference/...) points at resharding the
// run root, anything else at --rules. Other statuses pass through.
Status ExplainUnmatched(const Status& s);

// ModelSpec::Build with a hint in the error: a tensor no rule matches is an
// InvalidArgument that suggests --rules.
Result<reshard::ModelSpec> BuildSpec(const std::vector<TensorMeta>& tensors,
                                     const reshard::ModelRules& rules);

}  // namespace hy::cli

#endif  // HY_CLI_LAYOUT_RESHARD_INPUT_H_
