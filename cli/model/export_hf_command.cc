// hyctl export-hf RUN OUT: writes a Hugging Face directory (see
// hy/trainer/hf/hf_export.h) from a committed step of a trainer run (the store
// root hyctl train wrote, with one store per rank). The weights are
// assembled tensor by tensor from every rank's FSDP shards through
// CheckpointReader, named as Hugging Face names them (the "actor/" prefix
// dropped), so transformers' AutoModelForCausalLM loads the directory (the
// critic exports as *ForSequenceClassification with one label). The
// special token ids and tokenizer files are the run's (the checkpoint's
// record, hy/trainer/hf/run_tokens.h): transformers' generate() stops
// where the trainer's rollouts stopped.

#include "model/export_hf_command.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "hy/checkpoint/checkpoint.h"
#include "hy/recovery/run_root.h"
#include "hy/trainer/config/config.h"
#include "hy/trainer/config/model_config.h"
#include "hy/trainer/data/special_tokens.h"
#include "hy/trainer/hf/hf_export.h"
#include "hy/trainer/hf/hf_model.h"
#include "hy/trainer/hf/run_tokens.h"

namespace hy::cli {
namespace {

struct ExportHfArgs {
  std::string run;
  std::string out;
  int64_t step = -1;
  std::string model = "actor";
  std::string dtype;  // Empty: the source model's.
  std::string tokenizer;
  uint64_t max_shard_bytes = 5'000'000'000;
  bool allow_other_run = false;
};

// float32 or bfloat16 as the source config.json says (float32 for a
// random-init run and for float16, which export does not write).
std::string SourceDtype(const std::string& config_json) {
  const auto j = nlohmann::json::parse(config_json, nullptr, false);
  if (!j.is_object()) return "float32";
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (j.contains(key) && j[key] == "bfloat16") return "bfloat16";
  }
  return "float32";
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  if (in) text << in.rdbuf();
  return text.str();
}

// The tokenizer files to copy: the run's, from where it recorded them or
// from `override_dir`, checked against the hashes it recorded.
Result<std::string> TokenizerDir(const trainer::RunTokens& tokens,
                                 const std::string& override_dir) {
  if (tokens.tokenizer_dir.empty()) {
    if (!override_dir.empty()) {
      return Status::InvalidArgument(
          "--tokenizer: this run trained on the built-in task's own "
          "symbols, not a tokenizer");
    }
    return std::string();
  }
  const std::string dir =
      override_dir.empty() ? tokens.tokenizer_dir : override_dir;
  Status s = trainer::CheckTokenizerFiles(tokens, dir);
  if (!s.ok()) {
    return Status(s.code(),
                  std::string(s.message()) +
                      (override_dir.empty()
                           ? "; pass --tokenizer DIR with the run's files"
                           : ""));
  }
  return dir;
}

int ExportHf(const ExportHfArgs& a) {
  if (a.model != "actor" && a.model != "critic" && a.model != "reference") {
    return Report("export-hf",
                  Status::InvalidArgument("--model must be actor, critic or "
                                          "reference, got " +
                                          a.model));
  }
  std::string dtype;  // Canonical; empty: the source model's.
  if (!a.dtype.empty()) {
    Result<std::string> parsed = ParseWeightsDtype(a.dtype);
    if (!parsed.ok()) return ReportArgs("export-hf", parsed.status());
    dtype = *parsed;
  }
  if (Status s = recovery::RunRoot::Open(a.run).status(); !s.ok()) {
    return ReportArgs("export-hf", s);
  }
  auto reader = checkpoint::CheckpointReader::Open(
      a.run, a.step, /*generation=*/-1, a.allow_other_run);
  if (!reader.ok()) return Report("export-hf", reader.status());
  auto config_text = (*reader)->ReadBlob("trainer.config");
  if (!config_text.ok()) return Report("export-hf", config_text.status());
  auto config = trainer::ParseConfigYaml(*config_text);
  if (!config.ok()) return Report("export-hf", config.status());
  auto tokens = trainer::RunTokensOf(reader->get(), *config);
  if (!tokens.ok()) return Report("export-hf", tokens.status());
  auto tokenizer_dir = TokenizerDir(*tokens, a.tokenizer);
  if (!tokenizer_dir.ok()) return Report("export-hf", tokenizer_dir.status());
  trainer::HfExportOptions o;
  o.model = config->model;
  o.role = a.model == "critic" ? trainer::ModelRole::kCritic
                               : trainer::ModelRole::kActor;
  o.max_shard_bytes = a.max_shard_bytes;
  o.tokens = tokens->spec;
  o.tokenizer_dir = *tokenizer_dir;
  auto source = (*reader)->ReadBlob(std::string(trainer::kHfConfigBlob));
  if (source.ok()) {
    o.source_config_json = *source;
    if (!config->model.path.empty()) {
      o.source_generation_config_json =
          ReadText(config->model.path + "/generation_config.json");
    }
  } else if (!source.status().IsNotFound()) {
    return Report("export-hf", source.status());
  }
  if (dtype.empty()) dtype = SourceDtype(o.source_config_json);
  o.dtype = dtype == "bfloat16" ? DType::kBF16 : DType::kF32;
  auto written = trainer::WriteHfDirectory(
      a.out, o, [&](const TensorMeta& meta, float* out) {
        const int64_t n = *meta.NumElements();
        return (*reader)->ReadRegion(
            a.model + "/" + meta.name, {0, n},
            MutableBytes(reinterpret_cast<uint8_t*>(out),
                         static_cast<size_t>(n) * 4));
      });
  for (const std::string& f : (*reader)->fallbacks()) {
    std::cerr << "export-hf: " << f << "\n";
  }
  if (!written.ok()) return Report("export-hf", written.status());
  std::cout << "exported " << a.model << " of step " << (*reader)->step()
            << " (" << written->num_tensors << " tensors, "
            << written->tensor_bytes << " bytes, " << dtype << ") to "
            << a.out << ":";
  for (const auto& f : written->files) std::cout << " " << f;
  std::cout << "\n";
  return kExitOk;
}

}  // namespace

void AddExportHfCommand(CLI::App* app, int* exit_code) {
  auto args = std::make_shared<ExportHfArgs>();
  CLI::App* cmd = app->add_subcommand(
      "export-hf",
      "Write a trainer run's model as a Hugging Face directory "
      "(config.json + model.safetensors)");
  cmd->add_option("run", args->run, "Store root of the run (hyctl train)")
      ->required();
  cmd->add_option("out", args->out, "Output directory")->required();
  cmd->add_option("--step", args->step, "Committed step (default: newest)");
  cmd->add_option("--model", args->model, "actor | critic | reference");
  cmd->add_option("--dtype", args->dtype,
                  "float32 (fp32, f32) | bfloat16 (bf16) (default: the "
                  "source model's; float32 for a random-init run)");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "Where the run's tokenizer files are now, if they moved "
                  "(checked against the hashes the run recorded)");
  cmd->add_option("--max-shard-size", args->max_shard_bytes,
                  "Bytes per safetensors file; larger models are sharded "
                  "with an index (default 5000000000)");
  cmd->add_flag("--allow-other-run", args->allow_other_run,
                "Read the stores under the run root as one run even when "
                "they record different run ids");
  cmd->callback([args, exit_code] { *exit_code = ExportHf(*args); });
}

}  // namespace hy::cli
