// Conventions every hyctl command follows: exit codes, error reporting and
// the -o/--output option. Data goes to stdout, diagnostics to stderr.
//
// Thread-safety: hyctl is single-threaded; these helpers keep no state.

#ifndef HY_CLI_CLI_UTIL_H_
#define HY_CLI_CLI_UTIL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"
#include "hy/launcher/exit_codes.h"

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// hyctl's exit codes: the launcher room's (the supervisor reads its
// workers' by them).
using launcher::ExitCode;
using launcher::ExitCodeFor;
using launcher::kExitCheckpointFailed;
using launcher::kExitConfig;
using launcher::kExitDataLoss;
using launcher::kExitError;
using launcher::kExitNotFound;
using launcher::kExitOk;
using launcher::kExitUsage;
using launcher::Report;
using launcher::ReportArgs;

// The epilogue of `hyctl --help` that documents the exit codes.
std::string ExitCodeHelp();

// The dtype of exported weights as a user may spell it: "float32" for
// float32, fp32 or f32; "bfloat16" for bfloat16 or bf16. Returns
// InvalidArgument for float16 (also fp16, f16: hy writes no float16) and
// anything else.
Result<std::string> ParseWeightsDtype(std::string_view text);

// Adds "-o,--output FORMAT" to `command`, accepting only `formats` (the first
// is the default) and storing the choice in `*format`.
void AddOutputOption(CLI::App* command, std::string* format,
                     const std::vector<std::string>& formats);

// Adds `old_name` to `command` as an old spelling of its option `new_name`
// (which stores into *value): hidden from --help, it stores into *value
// too and warns on stderr, naming the command, that it is the old
// spelling. For a release after an option is renamed.
void AddOldSpelling(CLI::App* command, const std::string& old_name,
                    const std::string& new_name, int64_t* value);
void AddOldSpelling(CLI::App* command, const std::string& old_name,
                    const std::string& new_name,
                    std::optional<uint64_t>* value);
void AddOldSpelling(CLI::App* command, const std::string& old_name,
                    const std::string& new_name, std::string* value);

// `bytes` in MB (10^6 bytes) with two decimals: "12.34".
std::string Mb(uint64_t bytes);

// Formats rows as a left-aligned table with a header row, columns separated
// by two spaces, trailing spaces trimmed, one row per line.
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

}  // namespace hy::cli

#endif  // HY_CLI_CLI_UTIL_H_
