// A Hugging Face model directory as the trainer reads it: config.json (the
// architecture, see ModelConfig) and the weights in model.safetensors or in
// shards model-0000k-of-0000n.safetensors listed by
// model.safetensors.index.json.
//
// ReadHfConfig maps config.json onto ModelConfig, refusing what hy does not
// implement rather than ignoring it: an architecture other than Llama /
// Qwen2 / Qwen3ForCausalLM, hidden_act other than silu, sliding-window
// attention, non-zero attention dropout, a rope type other than default
// and llama3, a dtype other than float32 / bfloat16 / float16. Every error
// names the file and the field. The rotary settings are read from
// rope_parameters (transformers 5) or else from rope_theta and
// rope_scaling (transformers 4).
//
// HfWeights opens the weight files (memory-mapped: pages are read when a
// range is touched, so a rank that reads only its FSDP shard's byte ranges
// never pulls the whole model in) and checks, before any training, that
// every tensor the architecture needs is there with its shape.
//
// Thread-safety: HfWeights is immutable after Open; ReadF32 may be called
// concurrently.

#ifndef HY_TRAINER_HF_HF_MODEL_H_
#define HY_TRAINER_HF_HF_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"
#include "hy/trainer/config/model_config.h"

namespace hy::statestore {
class SafetensorsReader;
}

namespace hy::trainer {

// The checkpoint blob holding the config.json a run started from.
inline constexpr std::string_view kHfConfigBlob = "model.hf_config";

// Parses `dir`/config.json. The result's path is `dir`. Returns NotFound if
// the file is missing, InvalidArgument naming the field for a value hy does
// not implement or a field of the wrong type, DataLoss for JSON that does
// not parse.
Result<ModelConfig> ReadHfConfig(const std::string& dir);

// Parses config.json text (`where` names it in errors).
Result<ModelConfig> ParseHfConfig(const std::string& json_text,
                                  const std::string& where);

// The eos_token_id of config.json text (a number or a list of numbers);
// empty when absent or unreadable.
std::vector<int> HfEosTokenIds(const std::string& config_json);

// The model's eos ids: config_json's, then those of `dir`'s
// generation_config.json (if any) not already listed, as transformers'
// generate() stops on them.
std::vector<int> HfModelEosIds(const std::string& dir,
                               const std::string& config_json);

// When config->path names a directory, replaces every architecture field
// of *config by its config.json (path stays) and, if config_json is not
// null, sets *config_json to the file's text; else does nothing. Returns
// ReadHfConfig's errors.
Status ResolveModelPath(ModelConfig* config,
                        std::string* config_json = nullptr);

class HfWeights {
 public:
  // Opens the weights of `dir` for `config` (the actor's tensors; an
  // lm_head the file has for a tied model is ignored). Returns NotFound
  // naming the file for a missing weight or shard file, InvalidArgument
  // naming the tensor and file for a tensor that is absent, of another
  // shape, or not a floating-point dtype; DataLoss for a malformed file.
  static Result<std::unique_ptr<HfWeights>> Open(const std::string& dir,
                                                 const ModelConfig& config);
  ~HfWeights();

  // Copies elements [begin, begin + count) of tensor `name` (row-major) to
  // `out` as f32. Returns NotFound for an unknown name, InvalidArgument for a
  // range past the tensor's end.
  Status ReadF32(const std::string& name, int64_t begin, int64_t count,
                 float* out) const;

  // The weight files, in the order opened (relative to the directory).
  std::vector<std::string> files() const;

 private:
  struct Entry {
    const statestore::SafetensorsReader* file;
    size_t index;  // In file->tensors().
  };
  HfWeights() = default;

  std::vector<
      std::pair<std::string, std::unique_ptr<statestore::SafetensorsReader>>>
      files_;
  std::map<std::string, Entry> tensors_;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_HF_HF_MODEL_H_
