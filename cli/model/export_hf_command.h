// hyctl export-hf: a trainer run's model as a Hugging Face directory.
#ifndef HY_CLI_MODEL_EXPORT_HF_COMMAND_H_
#define HY_CLI_MODEL_EXPORT_HF_COMMAND_H_

#include <CLI/CLI.hpp>

namespace hy::cli {

// Adds `export-hf RUN OUT [--step N] [--model actor|critic|reference]`.
void AddExportHfCommand(CLI::App* app, int* exit_code);

}  // namespace hy::cli

#endif  // HY_CLI_MODEL_EXPORT_HF_COMMAND_H_
