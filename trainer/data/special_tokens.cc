// SpecialTokensFor and the tokenizer directory's files (special_tokens.h).

#include "hy/trainer/data/special_tokens.h"

#include <algorithm>
#include <filesystem>

namespace hy::trainer {
namespace {

namespace fs = std::filesystem;

void AddOnce(std::vector<int>* ids, int id) {
  if (std::find(ids->begin(), ids->end(), id) == ids->end()) {
    ids->push_back(id);
  }
}

}  // namespace

std::string TokenizerDir(const std::string& path) {
  return fs::is_directory(path) ? path : fs::path(path).parent_path().string();
}

std::optional<ChatFamily> ChatFamilyOf(const std::string& tokenizer_path) {
  auto t = ChatTemplate::FromTokenizerConfigFile(
      (fs::path(TokenizerDir(tokenizer_path)) / "tokenizer_config.json")
          .string());
  if (!t.ok()) return std::nullopt;
  return t->family();
}

const std::vector<std::string>& TokenizerFileNames() {
  static const std::vector<std::string> names = {"tokenizer.json",
                                                 "tokenizer_config.json",
                                                 "special_tokens_map.json",
                                                 "vocab.json",
                                                 "merges.txt",
                                                 "tokenizer.model",
                                                 "added_tokens.json",
                                                 "chat_template.jinja"};
  return names;
}

std::string_view TurnEndToken(ChatFamily family) {
  return family == ChatFamily::kLlama3 ? "<|eot_id|>" : "<|im_end|>";
}

Result<TokenSpec> SpecialTokensFor(const Tokenizer& tokenizer,
                                   std::optional<ChatFamily> chat,
                                   const std::vector<int>& model_eos) {
  TokenSpec spec;
  spec.bos = tokenizer.bos_id() ? *tokenizer.bos_id() : -1;
  spec.eos.clear();
  if (tokenizer.eos_id()) spec.eos.push_back(*tokenizer.eos_id());
  if (chat) {
    const std::string_view end = TurnEndToken(*chat);
    const std::optional<int32_t> id = tokenizer.TokenToId(end);
    if (!id) {
      return Status::InvalidArgument(
          "tokenizer: its " + std::string(ChatFamilyName(*chat)) +
          " chat template ends turns with " + std::string(end) +
          ", which is not one of its tokens");
    }
    AddOnce(&spec.eos, *id);
  }
  for (int id : model_eos) AddOnce(&spec.eos, id);
  if (spec.eos.empty()) {
    return Status::InvalidArgument(
        "tokenizer: no eos_token in tokenizer_config.json and no "
        "eos_token_id in the model's config.json: responses could not end");
  }
  spec.pad = tokenizer.pad_id() ? *tokenizer.pad_id() : spec.eos.front();
  return spec;
}

}  // namespace hy::trainer
