// hyctl export-hf RUN OUT: writes OUT/config.json and OUT/model.safetensors
// from a committed step of a trainer run (the store root hyctl train wrote,
// with one store per rank). The weights are assembled from every rank's
// FSDP shards through CheckpointReader, named as Hugging Face names them
// (the "actor/" prefix dropped), so transformers' AutoModelForCausalLM loads
// the directory (LlamaForCausalLM; the critic exports as
// LlamaForSequenceClassification with one label).

#include "export_hf_command.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "hy/statestore/safetensors.h"
#include "hy/trainer/checkpoint.h"
#include "hy/trainer/config.h"
#include "hy/trainer/model_config.h"
#include "hy/trainer/task.h"

namespace hy::cli {
namespace {

struct Args {
  std::string run;
  std::string out;
  int64_t step = -1;
  std::string model = "actor";
};

nlohmann::json HfConfig(const trainer::ModelConfig& m, bool critic) {
  return {
      {"architectures",
       {critic ? "LlamaForSequenceClassification" : "LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", m.vocab_size},
      {"hidden_size", m.hidden_size},
      {"intermediate_size", m.intermediate_size},
      {"num_hidden_layers", m.num_layers},
      {"num_attention_heads", m.num_heads},
      {"num_key_value_heads", m.num_kv_heads},
      {"head_dim", m.head_dim()},
      {"max_position_embeddings", m.max_position_embeddings},
      {"rms_norm_eps", m.rms_norm_eps},
      {"rope_theta", m.rope_theta},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"tie_word_embeddings", false},
      {"torch_dtype", "float32"},
      {"num_labels", 1},
      {"bos_token_id", trainer::kBos},
      {"eos_token_id", trainer::kEos},
      {"pad_token_id", trainer::kPad},
  };
}

int ExportHf(const Args& a) {
  if (a.model != "actor" && a.model != "critic" && a.model != "reference") {
    return Report("export-hf",
                  Status::InvalidArgument("--model must be actor, critic or "
                                          "reference, got " +
                                          a.model));
  }
  auto reader = trainer::CheckpointReader::Open(a.run, a.step);
  if (!reader.ok()) return Report("export-hf", reader.status());
  auto config_text = (*reader)->ReadBlob("trainer.config");
  if (!config_text.ok()) return Report("export-hf", config_text.status());
  auto config = trainer::ParseConfigYaml(*config_text);
  if (!config.ok()) return Report("export-hf", config.status());
  const bool critic = a.model == "critic";
  std::vector<TensorMeta> metas =
      trainer::ModelTensors(config->model, critic ? trainer::ModelRole::kCritic
                                                  : trainer::ModelRole::kActor);
  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  if (ec) {
    return Report("export-hf", Status::IOError("cannot create " + a.out + ": " +
                                               ec.message()));
  }
  const std::string file = a.out + "/model.safetensors";
  auto writer =
      statestore::SafetensorsWriter::Create(file, metas, {{"format", "pt"}});
  if (!writer.ok()) return Report("export-hf", writer.status());
  std::vector<uint8_t> buf;
  uint64_t bytes = 0;
  for (const auto& t : (*writer)->tensors()) {
    const int64_t n = *t.meta.NumElements();
    buf.resize(static_cast<size_t>(n) * 4);
    Status s = (*reader)->ReadRegion(a.model + "/" + t.meta.name, {0, n},
                                     MutableBytes(buf));
    if (s.ok()) s = (*writer)->Append(t.meta.name, ConstBytes(buf));
    if (!s.ok()) return Report("export-hf", s);
    bytes += buf.size();
  }
  Status s = (*writer)->Finish();
  if (!s.ok()) return Report("export-hf", s);
  std::ofstream cfg(a.out + "/config.json");
  cfg << HfConfig(config->model, critic).dump(2) << "\n";
  if (!cfg) {
    return Report("export-hf",
                  Status::IOError("cannot write " + a.out + "/config.json"));
  }
  std::cout << "exported " << a.model << " of step " << (*reader)->step()
            << " (" << metas.size() << " tensors, " << bytes << " bytes) to "
            << a.out << "\n";
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
  cmd->callback([args, exit_code] { *exit_code = ExportHf(*args); });
}

}  // namespace hy::cli
