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

Result<std::optional<std::string>> TurnEndOf(
    const std::string& tokenizer_path) {
  auto t = ChatTemplate::Load(TokenizerDir(tokenizer_path));
  if (t.status().IsNotFound()) return std::optional<std::string>();
  if (!t.ok()) return t.status();
  HY_ASSIGN_OR_RETURN(RenderedChats r, t->Render({}, "{}"));
  return r.turn_end;
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

Result<TokenSpec> SpecialTokensFor(const Tokenizer& tokenizer,
                                   const std::optional<std::string>& turn_end,
                                   const std::vector<int>& model_eos) {
  TokenSpec spec;
  spec.bos = tokenizer.bos_id() ? *tokenizer.bos_id() : -1;
  spec.eos.clear();
  if (tokenizer.eos_id()) spec.eos.push_back(*tokenizer.eos_id());
  if (turn_end && !turn_end->empty()) {
    // The first token the template writes after the content, when it is a
    // special one: what the model was taught to end its turn with.
    auto ids = tokenizer.Encode(*turn_end);
    if (ids.ok() && !ids->empty() && tokenizer.IsSpecial(ids->front())) {
      AddOnce(&spec.eos, ids->front());
    }
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
