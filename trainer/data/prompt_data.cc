#include "hy/trainer/data/prompt_data.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <utility>

namespace hy::trainer {
namespace {

using nlohmann::json;

Status LineError(std::string_view where, std::string_view what) {
  return Status::InvalidArgument(std::string(where) + ": " + std::string(what));
}

Result<ChatMessage> ParseMessage(const json& m, size_t i,
                                 std::string_view where) {
  const std::string at = "prompt[" + std::to_string(i) + "]";
  if (!m.is_object()) return LineError(where, at + " is not an object");
  auto role = m.find("role");
  if (role == m.end() || !role->is_string()) {
    return LineError(where, at + " lacks a string \"role\"");
  }
  if (!IsKnownChatRole(role->get_ref<const std::string&>())) {
    return LineError(where, at + ".role \"" + role->get<std::string>() +
                                "\" is not system, user or assistant");
  }
  auto content = m.find("content");
  if (content == m.end() || !content->is_string()) {
    return LineError(where, at + " lacks a string \"content\"");
  }
  return ChatMessage{role->get<std::string>(), content->get<std::string>()};
}

Result<ChatPrompt> ParsePrompt(const json& p, std::string_view where) {
  ChatPrompt prompt;
  if (p.is_string()) {
    prompt.text = p.get<std::string>();
    return prompt;
  }
  if (!p.is_array() || p.empty()) {
    return LineError(where,
                     "\"prompt\" must be a string or a non-empty list of "
                     "chat messages");
  }
  prompt.is_chat = true;
  for (size_t i = 0; i < p.size(); ++i) {
    HY_ASSIGN_OR_RETURN(ChatMessage m, ParseMessage(p[i], i, where));
    prompt.messages.push_back(std::move(m));
  }
  return prompt;
}

Result<PromptRecord> ParseRecord(std::string_view line, std::string where) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    return LineError(where, std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) return LineError(where, "not a JSON object");
  auto p = j.find("prompt");
  if (p == j.end()) return LineError(where, "no \"prompt\" field");
  PromptRecord record;
  HY_ASSIGN_OR_RETURN(record.prompt, ParsePrompt(*p, where));
  for (const auto& [key, value] : j.items()) {
    if (key == "prompt") continue;
    record.fields[key] =
        value.is_string() ? value.get<std::string>() : value.dump();
  }
  if (auto a = record.fields.find("answer"); a != record.fields.end()) {
    record.answer = a->second;
  }
  record.source = std::move(where);
  return record;
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r\f\v") == std::string_view::npos;
}

// Appends the records of one file's text to `out`.
Status ParseText(std::string_view text, std::string_view file_name,
                 std::vector<PromptRecord>* out) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (text.substr(0, kBom.size()) == kBom) text.remove_prefix(kBom.size());
  size_t line_number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    ++line_number;
    if (IsBlank(line)) continue;
    if (line.back() == '\r') line.remove_suffix(1);
    std::string where =
        std::string(file_name) + ":" + std::to_string(line_number);
    HY_ASSIGN_OR_RETURN(PromptRecord r, ParseRecord(line, std::move(where)));
    out->push_back(std::move(r));
  }
  return Status::OK();
}

Result<std::string> ReadFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return Status::NotFound(path + ": no such prompt file");
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::InvalidArgument(path + ": not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return Status::IOError(path + ": cannot read");
  return bytes;
}

void HashFile(std::string_view bytes, Hasher128* hasher) {
  uint8_t size[8];
  for (int i = 0; i < 8; ++i) size[i] = (bytes.size() >> (8 * i)) & 0xFF;
  hasher->Update(ConstBytes(size, sizeof(size)));
  hasher->Update(ConstBytes(bytes));
}

}  // namespace

Result<PromptDataset> PromptDataset::Load(
    const std::vector<std::string>& files) {
  if (files.empty()) {
    return Status::InvalidArgument("data.train_files: no prompt file given");
  }
  PromptDataset d;
  Hasher128 hasher;
  std::string names;
  for (const std::string& path : files) {
    HY_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
    HY_RETURN_IF_ERROR(ParseText(bytes, path, &d.records_));
    HashFile(bytes, &hasher);
    names += (names.empty() ? "" : ", ") + path;
  }
  if (d.records_.empty()) {
    return Status::InvalidArgument("data.train_files: no record in " + names);
  }
  d.fingerprint_ = hasher.Digest();
  return d;
}

Result<PromptDataset> PromptDataset::FromText(std::string_view text,
                                              std::string_view file_name) {
  PromptDataset d;
  HY_RETURN_IF_ERROR(ParseText(text, file_name, &d.records_));
  if (d.records_.empty()) {
    return Status::InvalidArgument(std::string(file_name) + ": no record");
  }
  Hasher128 hasher;
  HashFile(text, &hasher);
  d.fingerprint_ = hasher.Digest();
  return d;
}

}  // namespace hy::trainer
