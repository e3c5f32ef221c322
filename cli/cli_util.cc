#include "cli_util.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include "hy/recovery/node_layout.h"

namespace hy::cli {

std::string ExitCodeHelp() {
  return "Exit codes:\n"
         "  0   success\n"
         "  1   error (diff: the states differ)\n"
         "  2   not found (a named step, store or object does not exist)\n"
         "  3   data loss (stored data is corrupt or truncated)\n"
         "  64  bad usage (unknown option, missing or invalid argument)\n"
         "  74  train: checkpoints cannot be written (disk full, write "
         "error); not restarted\n"
         "  " +
         std::to_string(recovery::kExitPeerFailed) +
         "  train: a worker stopped because a peer failed, no restart "
         "left\n"
         "  " +
         std::to_string(recovery::kExitUnrecoverable) +
         "  train: unrecoverable (too few nodes, or every copy of a part "
         "lost)\n"
         "Data is written to stdout, diagnostics to stderr.";
}

Result<std::string> ParseWeightsDtype(std::string_view text) {
  if (text == "float32" || text == "fp32" || text == "f32") {
    return std::string("float32");
  }
  if (text == "bfloat16" || text == "bf16") return std::string("bfloat16");
  const std::string given(text);
  if (text == "float16" || text == "fp16" || text == "f16") {
    return Status::InvalidArgument("--dtype " + given +
                                   ": float16 weights are not written; give "
                                   "float32 (fp32, f32) or bfloat16 (bf16)");
  }
  return Status::InvalidArgument("--dtype must be float32 (fp32, f32) or "
                                 "bfloat16 (bf16), got " +
                                 given);
}

void AddOutputOption(CLI::App* command, std::string* format,
                     const std::vector<std::string>& formats) {
  *format = formats.front();
  std::string names;
  for (const std::string& f : formats) names += (names.empty() ? "" : "|") + f;
  command->add_option("-o,--output", *format, "Output format: " + names)
      ->check(CLI::IsMember(formats))
      ->capture_default_str();
}

namespace {

template <typename T>
void AddOldSpellingOf(CLI::App* command, const std::string& old_name,
                      const std::string& new_name, T* value) {
  const std::string warning = "hyctl " + command->get_name() + ": " +
                              old_name + " is the old spelling of " +
                              new_name + " and goes in hy 0.2.0; use " +
                              new_name;
  command->add_option(old_name, *value, "Old spelling of " + new_name)
      ->group("")
      ->each([warning](const std::string&) { std::cerr << warning << "\n"; });
}

}  // namespace

void AddOldSpelling(CLI::App* command, const std::string& old_name,
                    const std::string& new_name, int64_t* value) {
  AddOldSpellingOf(command, old_name, new_name, value);
}

void AddOldSpelling(CLI::App* command, const std::string& old_name,
                    const std::string& new_name,
                    std::optional<uint64_t>* value) {
  AddOldSpellingOf(command, old_name, new_name, value);
}

void AddOldSpelling(CLI::App* command, const std::string& old_name,
                    const std::string& new_name, std::string* value) {
  AddOldSpellingOf(command, old_name, new_name, value);
}

std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(header);
  for (const auto& row : rows) emit(row);
  return out;
}

std::string Mb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", bytes / 1e6);
  return buf;
}

}  // namespace hy::cli
