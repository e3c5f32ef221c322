// hyctl export-hf RUN OUT: writes a Hugging Face directory (see
// hy/trainer/hf_export.h) from a committed step of a trainer run (the store
// root hyctl train wrote, with one store per rank). The weights are
// assembled tensor by tensor from every rank's FSDP shards through
// CheckpointReader, named as Hugging Face names them (the "actor/" prefix
// dropped), so transformers' AutoModelForCausalLM loads the directory (the
// critic exports as *ForSequenceClassification with one label).

#include "export_hf_command.h"

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "hy/trainer/checkpoint.h"
#include "hy/trainer/config.h"
#include "hy/trainer/hf_export.h"
#include "hy/trainer/hf_model.h"
#include "hy/trainer/model_config.h"
#include "hy/trainer/task.h"

namespace hy::cli {
namespace {

struct Args {
  std::string run;
  std::string out;
  int64_t step = -1;
  std::string model = "actor";
  std::string dtype = "float32";
  uint64_t max_shard_bytes = 5'000'000'000;
};

int ExportHf(const Args& a) {
  if (a.model != "actor" && a.model != "critic" && a.model != "reference") {
    return Report("export-hf",
                  Status::InvalidArgument("--model must be actor, critic or "
                                          "reference, got " +
                                          a.model));
  }
  if (a.dtype != "float32" && a.dtype != "bfloat16") {
    return Report("export-hf", Status::InvalidArgument(
                                   "--dtype must be float32 or bfloat16, got " +
                                   a.dtype));
  }
  auto reader = trainer::CheckpointReader::Open(a.run, a.step);
  if (!reader.ok()) return Report("export-hf", reader.status());
  auto config_text = (*reader)->ReadBlob("trainer.config");
  if (!config_text.ok()) return Report("export-hf", config_text.status());
  auto config = trainer::ParseConfigYaml(*config_text);
  if (!config.ok()) return Report("export-hf", config.status());
  trainer::HfExportOptions o;
  o.model = config->model;
  o.role = a.model == "critic" ? trainer::ModelRole::kCritic
                               : trainer::ModelRole::kActor;
  o.dtype = a.dtype == "bfloat16" ? DType::kBF16 : DType::kF32;
  o.max_shard_bytes = a.max_shard_bytes;
  auto source = (*reader)->ReadBlob(std::string(trainer::kHfConfigBlob));
  if (source.ok()) {
    o.source_config_json = *source;
    o.tokenizer_dir = config->model.path;
  } else if (!source.status().IsNotFound()) {
    return Report("export-hf", source.status());
  } else {  // A random-init run of the built-in task.
    o.bos_token_id = trainer::kBos;
    o.eos_token_id = trainer::kEos;
    o.pad_token_id = trainer::kPad;
  }
  if (!o.tokenizer_dir.empty() &&
      !std::filesystem::is_directory(o.tokenizer_dir)) {
    std::cerr << "export-hf: " << o.tokenizer_dir
              << " (the run's model directory) is gone: no tokenizer files "
                 "copied\n";
    o.tokenizer_dir.clear();
  }
  auto written = trainer::WriteHfDirectory(
      a.out, o, [&](const TensorMeta& meta, float* out) {
        const int64_t n = *meta.NumElements();
        return (*reader)->ReadRegion(
            a.model + "/" + meta.name, {0, n},
            MutableBytes(reinterpret_cast<uint8_t*>(out),
                         static_cast<size_t>(n) * 4));
      });
  if (!written.ok()) return Report("export-hf", written.status());
  std::cout << "exported " << a.model << " of step " << (*reader)->step()
            << " (" << written->num_tensors << " tensors, "
            << written->tensor_bytes << " bytes, " << a.dtype << ") to "
            << a.out << ":";
  for (const auto& f : written->files) std::cout << " " << f;
  std::cout << "\n";
  return kExitOk;
}

}  // namespace

void AddExportHfCommand(CLI::App* app, int* exit_code) {
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app->add_subcommand(
      "export-hf",
      "Write a trainer run's model as a Hugging Face directory "
      "(config.json + model.safetensors)");
  cmd->add_option("run", args->run, "Store root of the run (hyctl train)")
      ->required();
  cmd->add_option("out", args->out, "Output directory")->required();
  cmd->add_option("--step", args->step, "Committed step (default: newest)");
  cmd->add_option("--model", args->model, "actor | critic | reference");
  cmd->add_option("--dtype", args->dtype, "float32 (default) | bfloat16");
  cmd->add_option("--max-shard-size", args->max_shard_bytes,
                  "Bytes per safetensors file; larger models are sharded "
                  "with an index (default 5000000000)");
  cmd->callback([args, exit_code] { *exit_code = ExportHf(*args); });
}

}  // namespace hy::cli
