// hyctl tokenize --tokenizer PATH: reads JSON Lines on stdin, one JSON
// string per line (with --text: one line of plain text, encoded as it is
// without its newline), and writes one JSON array of ids per line, in
// order. With --decode each input line is a JSON array of ids and each
// output line a JSON string. A line that is not what is expected stops the
// command with a message naming its number (what came before it is
// written) and a non-zero exit code.

#include "model/tokenize_command.h"

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "hy/trainer/tokenizer/tokenizer.h"

namespace hy::cli {
namespace {

using Json = nlohmann::json;

struct TokenizeArgs {
  std::string tokenizer;
  bool decode = false;
  bool text = false;  // Input lines are plain text, not JSON strings.
  bool add_special_tokens = false;
  bool skip_special_tokens = false;
};

// Turns one input line into one output line (without the newline).
Status ProcessLine(const trainer::Tokenizer& tok, const TokenizeArgs& a,
                   const std::string& line, std::string* out) {
  if (a.text) {
    auto ids = tok.Encode(line, a.add_special_tokens);
    if (!ids.ok()) return ids.status();
    *out += Json(*ids).dump();
    return Status::OK();
  }
  const Json in = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded()) {
    return Status::InvalidArgument(
        a.decode ? "not JSON"
                 : "not JSON (pass --text to encode plain-text lines)");
  }
  if (!a.decode) {
    if (!in.is_string()) {
      return Status::InvalidArgument(
          "not a JSON string (pass --text to encode plain-text lines)");
    }
    auto ids =
        tok.Encode(in.get_ref<const std::string&>(), a.add_special_tokens);
    if (!ids.ok()) return ids.status();
    out->push_back('[');
    for (size_t i = 0; i < ids->size(); ++i) {
      if (i > 0) out->push_back(',');
      *out += std::to_string((*ids)[i]);
    }
    out->push_back(']');
    return Status::OK();
  }
  if (!in.is_array()) return Status::InvalidArgument("not a JSON array of ids");
  std::vector<int32_t> ids;
  ids.reserve(in.size());
  for (const Json& id : in) {
    if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN ||
        id.get<int64_t>() > INT32_MAX) {
      return Status::InvalidArgument("not a JSON array of integer ids");
    }
    ids.push_back(id.get<int32_t>());
  }
  auto text = tok.Decode(ids, a.skip_special_tokens);
  if (!text.ok()) return text.status();
  *out += Json(*text).dump(-1, ' ', false, Json::error_handler_t::replace);
  return Status::OK();
}

int Tokenize(const TokenizeArgs& a) {
  auto tok = trainer::Tokenizer::Load(a.tokenizer);
  if (!tok.ok()) return Report("tokenize", tok.status());
  std::string line, out;
  size_t line_no = 0;
  Status status;
  while (std::getline(std::cin, line)) {
    ++line_no;
    status = ProcessLine(**tok, a, line, &out);
    if (!status.ok()) {
      status = status.WithContext("line " + std::to_string(line_no));
      break;
    }
    out.push_back('\n');
    if (out.size() >= (1 << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (std::fflush(stdout) != 0 && status.ok()) {
    status = Status::IOError("writing stdout failed");
  }
  return Report("tokenize", status);
}

}  // namespace

void AddTokenizeCommand(CLI::App* app, int* exit_code) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app->add_subcommand(
      "tokenize",
      "Encode lines from stdin, JSON strings (or plain text with --text), "
      "to id arrays (or --decode id arrays to strings) with a Hugging Face "
      "tokenizer.json");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json, or a directory holding it (and "
                  "tokenizer_config.json)")
      ->required();
  CLI::Option* decode =
      cmd->add_flag("--decode", args->decode,
                    "Input lines are JSON arrays of ids; output JSON strings");
  cmd->add_flag("--text", args->text,
                "Input lines are plain text, each encoded as it is (without "
                "its newline); by default each is a JSON string")
      ->excludes(decode);
  cmd->add_flag("--add-special-tokens", args->add_special_tokens,
                "Apply the post-processor's template (e.g. Llama 3's "
                "<|begin_of_text|>)");
  cmd->add_flag("--skip-special-tokens", args->skip_special_tokens,
                "With --decode, leave out special tokens");
  cmd->callback([args, exit_code] { *exit_code = Tokenize(*args); });
}

}  // namespace hy::cli
