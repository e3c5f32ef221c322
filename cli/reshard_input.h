// Inputs of hyctl plan and reshard: model spec files, a stored version's
// tensors in model order, and the split rules to apply (see
// reshard_command.h for the order rules).
//
// Thread-safety: plain functions; the Store calls are thread-safe.

#ifndef HY_CLI_RESHARD_INPUT_H_
#define HY_CLI_RESHARD_INPUT_H_

#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/tensor_meta.h"
#include "hy/reshard/model_spec.h"
#include "hy/statestore/store.h"

namespace hy::cli {

// True if `a` sorts before `b` in natural order: runs of digits compare as
// numbers ("layers.2" < "layers.10"), everything else byte by byte; names
// that compare equal that way ("1" and "01") fall back to byte order.
bool NaturalLess(const std::string& a, const std::string& b);

// Reads the tensors of a model spec file, in file order: a safetensors file
// (by its .safetensors suffix; its header only, in natural order), else a
// JSON array [{"name": ..., "dtype": "bf16", "shape": [...]}, ...] (dtype
// as safetensors spells it, any case). Returns NotFound if the file does not
// exist, InvalidArgument naming the entry for malformed JSON.
Result<std::vector<TensorMeta>> ReadModelSpecFile(const std::string& path);

// The tensors of committed `version` (whose manifest is `manifest`) in model
// order: as its tensor order blob lists them, else natural order. Returns
// DataLoss if the blob is not a JSON array naming each tensor exactly once,
// or what ReadBlob returns other than NotFound.
Result<std::vector<TensorMeta>> StoredTensors(
    statestore::Store* store, uint64_t version,
    const statestore::Manifest& manifest);

// The JSON text of the tensor order blob for `spec`.
std::string TensorOrderJson(const reshard::ModelSpec& spec);

// The rules to apply: the YAML file `rules_file` if not empty, else the
// `recorded` YAML of a commit record if not empty, else the shipped
// defaults. Returns NotFound for a missing file, InvalidArgument (naming
// the file, or "recorded") for rules that do not parse.
Result<reshard::ModelRules> ChooseRules(const std::string& rules_file,
                                        const std::string& recorded);

// ModelSpec::Build with a hint in the error: a tensor no rule matches is an
// InvalidArgument that suggests --rules.
Result<reshard::ModelSpec> BuildSpec(const std::vector<TensorMeta>& tensors,
                                     const reshard::ModelRules& rules);

}  // namespace hy::cli

#endif  // HY_CLI_RESHARD_INPUT_H_
