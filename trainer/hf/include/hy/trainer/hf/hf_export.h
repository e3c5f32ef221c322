// Writes a Hugging Face model directory from a model's tensors, the way
// transformers' save_pretrained lays one out:
//
//   config.json               the run's input config.json with its dtype
//                             fields set to the exported dtype, or, for a
//                             run that started from random weights, one
//                             written from ModelConfig; bos / eos / pad
//                             token ids the run's (special_tokens.h)
//   generation_config.json    the source's (sampling defaults kept), with
//                             the run's ids: eos a list when the run
//                             stopped on several, as Qwen's and Llama's
//                             own files spell it
//   model.safetensors         when the weights fit in max_shard_bytes, else
//   model-0000k-of-0000n.safetensors + model.safetensors.index.json
//   tokenizer files           copied from the tokenizer directory, if any
//
// The tensors are written in ModelTensors order, streamed one at a time
// through `read` (the caller assembles each from wherever it lives), so the
// exporter holds one tensor in memory, not the model.
//
// Thread-safety: a free function; concurrent calls need distinct outputs.

#ifndef HY_TRAINER_HF_HF_EXPORT_H_
#define HY_TRAINER_HF_HF_EXPORT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hy/common/bytes.h"
#include "hy/common/result.h"
#include "hy/common/status.h"
#include "hy/common/tensor_meta.h"
#include "hy/trainer/config/model_config.h"
#include "hy/trainer/data/prompt_source.h"

namespace hy::trainer {

struct HfExportOptions {
  ModelConfig model;
  ModelRole role = ModelRole::kActor;  // kCritic: *ForSequenceClassification.
  // The config.json text the run started from; empty: write one from model.
  std::string source_config_json;
  // The source's generation_config.json text; empty: none.
  std::string source_generation_config_json;
  // Directory whose tokenizer files (TokenizerFileNames() of
  // special_tokens.h) are copied; empty: none.
  std::string tokenizer_dir;
  DType dtype = DType::kF32;  // kF32 or kBF16.
  // The ids the run trained with; they replace the source config's. Unset:
  // the source's stay (a config written from scratch gets none).
  std::optional<TokenSpec> tokens;
  uint64_t max_shard_bytes = 5'000'000'000;  // save_pretrained's "5GB".
};

struct HfExportResult {
  std::vector<std::string> files;  // Written, relative to the directory.
  uint64_t tensor_bytes = 0;
  int num_tensors = 0;
};

// Writes the directory `out` (created if missing). `read(meta, out_f32)`
// fills one tensor's elements as f32. Returns InvalidArgument for an
// unsupported dtype or a source config (or generation config) that is not
// a JSON object, the
// read callback's errors, IOError for a file that cannot be written.
Result<HfExportResult> WriteHfDirectory(
    const std::string& out, const HfExportOptions& options,
    const std::function<Status(const TensorMeta& meta, float* out)>& read);

// config.json for `model` written from scratch (a run without a source
// config): the fields ReadHfConfig reads back to the same architecture.
std::string HfConfigJson(const HfExportOptions& options);

}  // namespace hy::trainer

#endif  // HY_TRAINER_HF_HF_EXPORT_H_
