// Tokenizer::Load / FromJson: reading tokenizer.json (and
// tokenizer_config.json) into the tables of tokenizer_internal::State,
// refusing what the encoder does not implement.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hy/trainer/tokenizer/tokenizer.h"
#include "tokenizer_internal.h"
#include "tokenizer_loader.h"

namespace hy::trainer {

namespace tokenizer_internal {

namespace {

using VocabIds = std::unordered_map<std::string_view, int32_t>;

// Refuses the BPE options the encoder does not implement: another model
// type, dropout, byte fallback and subword affixes.
Status CheckBpeOptions(const Loader& l, const Json& model) {
  if (model.contains("type") && model["type"] != "BPE") {
    return l.Unsupported("model.type", model["type"], "BPE");
  }
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      model["dropout"] != 0.0) {
    return l.Unsupported("model.dropout", model["dropout"], "null");
  }
  if (model.contains("byte_fallback") && model["byte_fallback"] != false) {
    return l.Unsupported("model.byte_fallback", model["byte_fallback"],
                         "false");
  }
  for (const char* affix :
       {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(affix) && !model[affix].is_null() &&
        model[affix] != "") {
      return l.Unsupported(std::string("model.") + affix, model[affix],
                           "\"\"");
    }
  }
  return Status::OK();
}

// The largest id of model.vocab (-1 when empty), refusing an id that is not
// an integer in [0, INT32_MAX).
Result<int64_t> MaxVocabId(const Loader& l, const Json& vocab) {
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const Json& id = it.value();
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= INT32_MAX) {
      return l.Bad("model.vocab[" + Json(it.key()).dump() + "]",
                   "is not a valid id");
    }
    max_id = std::max(max_id, id.get<int64_t>());
  }
  return max_id;
}

// Fills *ids (token -> id) and tokens[id] (the token's bytes) from the
// checked model.vocab; a token outside the byte alphabet goes to
// *unmappable instead of tokens.
void ReadVocab(const Json& vocab, VocabIds* ids,
               std::unordered_map<int32_t, std::string>* unmappable,
               std::vector<std::string>* tokens) {
  std::string bytes;
  ids->reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const std::string& token = it.key();  // stable: a key of the document
    const int32_t id = it.value().get<int32_t>();
    ids->emplace(token, id);
    // A token with characters outside the byte alphabet can never come out
    // of the merges; it is kept only to be decoded as written.
    if (tokenizer_internal::ByteLevelToBytes(token, &bytes)) {
      (*tokens)[id] = std::move(bytes);
    } else {
      unmappable->emplace(id, token);
    }
  }
}

// "model.merges[i]", for messages.
std::string MergeField(size_t i) {
  return "model.merges[" + std::to_string(i) + "]";
}

// Entry i of model.merges, "a b" or [a, b], into its two tokens (views
// into the document).
Status SplitMerge(const Loader& l, size_t i, const Json& m,
                  std::string_view* left, std::string_view* right) {
  if (m.is_string()) {
    const std::string& text = m.get_ref<const std::string&>();
    const size_t space = text.find(' ');
    if (space == std::string::npos ||
        text.find(' ', space + 1) != std::string::npos) {
      return l.Bad(MergeField(i),
                   m.dump() + " is not two tokens separated by a space");
    }
    *left = std::string_view(text).substr(0, space);
    *right = std::string_view(text).substr(space + 1);
  } else if (m.is_array() && m.size() == 2 && m[0].is_string() &&
             m[1].is_string()) {
    *left = m[0].get_ref<const std::string&>();
    *right = m[1].get_ref<const std::string&>();
  } else {
    return l.Bad(MergeField(i), "is neither \"a b\" nor [a, b]");
  }
  return Status::OK();
}

// model.merges as pairs of ids, refusing a token not in the vocabulary or
// outside the byte-level alphabet (an empty tokens[id]).
Result<std::vector<BpeModel::Merge>> ReadMerges(
    const Loader& l, const Json& merges, const VocabIds& vocab,
    const std::vector<std::string>& tokens) {
  std::vector<BpeModel::Merge> pairs;
  pairs.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string_view left, right;
    HY_RETURN_IF_ERROR(SplitMerge(l, i, merges[i], &left, &right));
    int32_t ids[2];
    for (int k = 0; k < 2; ++k) {
      const std::string_view token = k == 0 ? left : right;
      auto it = vocab.find(token);
      if (it == vocab.end()) {
        return l.Bad(MergeField(i),
                     "names token " + Json(std::string(token)).dump() +
                         ", not in model.vocab");
      }
      ids[k] = it->second;
      if (tokens[ids[k]].empty()) {
        return l.Bad(MergeField(i),
                     "names a token outside the byte-level alphabet");
      }
    }
    pairs.push_back(BpeModel::Merge{ids[0], ids[1]});
  }
  return pairs;
}

// model.unk_token (a token of the vocabulary, or null) and model.fuse_unk.
Result<BpeModel::Unknown> ReadUnknown(const Loader& l, const Json& model,
                                      const VocabIds& vocab) {
  BpeModel::Unknown unknown;
  const Json& unk = Get(model, "unk_token");
  if (unk.is_string()) {
    auto it = vocab.find(unk.get_ref<const std::string&>());
    if (it == vocab.end()) {
      return l.Bad("model.unk_token", unk.dump() + " is not in model.vocab");
    }
    unknown.unk_id = it->second;
  } else if (!unk.is_null()) {
    return l.Bad("model.unk_token", "is neither a string nor null");
  }
  const Json& fuse = Get(model, "fuse_unk");
  if (!fuse.is_null() && !fuse.is_boolean()) {
    return l.Bad("model.fuse_unk", "is not a bool");
  }
  unknown.fuse_unk = fuse.is_boolean() && fuse.get<bool>();
  return unknown;
}

}  // namespace

Status Loader::Model(const Json& model) {
  if (!model.is_object()) return Bad("model", "is not an object");
  HY_RETURN_IF_ERROR(CheckBpeOptions(*this, model));
  const Json& vocab = Get(model, "vocab");
  if (!vocab.is_object()) return Bad("model.vocab", "is not an object");
  HY_ASSIGN_OR_RETURN(const int64_t max_id, MaxVocabId(*this, vocab));
  std::vector<std::string> tokens(static_cast<size_t>(max_id + 1));
  ReadVocab(vocab, &vocab_, &s_->unmappable, &tokens);
  const Json& merges = Get(model, "merges");
  if (!merges.is_array()) return Bad("model.merges", "is not an array");
  HY_ASSIGN_OR_RETURN(const std::vector<BpeModel::Merge> pairs,
                      ReadMerges(*this, merges, vocab_, tokens));
  const Json& ignore = Get(model, "ignore_merges");
  if (!ignore.is_null() && !ignore.is_boolean()) {
    return Bad("model.ignore_merges", "is not a bool");
  }
  HY_ASSIGN_OR_RETURN(const BpeModel::Unknown unknown,
                      ReadUnknown(*this, model, vocab_));
  HY_ASSIGN_OR_RETURN(
      s_->bpe, BpeModel::Build(std::move(tokens), pairs,
                               ignore.is_boolean() && ignore.get<bool>(),
                               unknown, name_));
  s_->vocab_size = static_cast<int32_t>(max_id + 1);
  return Status::OK();
}

Status Loader::AddedTokens(const Json& added) {
  if (!added.is_null() && !added.is_array()) {
    return Bad("added_tokens", "is not an array");
  }
  for (size_t i = 0; !added.is_null() && i < added.size(); ++i) {
    const std::string f = "added_tokens[" + std::to_string(i) + "]";
    const Json& t = added[i];
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        t["id"].get<int64_t>() < 0 || t["id"].get<int64_t>() >= INT32_MAX ||
        !t.contains("content") || !t["content"].is_string() ||
        t["content"].get<std::string>().empty()) {
      return Bad(f, "needs an id >= 0 and a non-empty content");
    }
    if (t.value("single_word", false)) {
      return Unsupported(f + ".single_word", true, "false");
    }
    AddedToken token;
    token.id = t["id"].get<int32_t>();
    token.content = t["content"].get<std::string>();
    if (tokenizer_internal::FindInvalidUtf8(token.content) !=
        std::string::npos) {
      return Bad(f + ".content", "is not valid UTF-8");
    }
    token.special = t.value("special", false);
    token.lstrip = t.value("lstrip", false);
    token.rstrip = t.value("rstrip", false);
    token.normalized = t.value("normalized", !token.special);
    const int32_t index = static_cast<int32_t>(s_->added.size());
    if (token.normalized && s_->nfc) {
      std::string nfc = token.content;
      HY_ASSIGN_OR_RETURN(
          bool changed, tokenizer_internal::NormalizeNfc(token.content, &nfc));
      (void)changed;
      s_->normalized_matcher.Add(nfc, index);
    } else {
      s_->raw_matcher.Add(token.content, index);
    }
    s_->vocab_size = std::max(s_->vocab_size, token.id + 1);
    s_->added.push_back(std::move(token));
  }
  s_->added_index.assign(s_->vocab_size, -1);
  for (size_t i = 0; i < s_->added.size(); ++i) {
    s_->added_index[s_->added[i].id] = static_cast<int32_t>(i);
  }
  return Status::OK();
}

Status Loader::Config(std::string_view config_text) {
  if (config_text.empty()) return Status::OK();
  Json config = Json::parse(config_text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return Status::InvalidArgument("tokenizer_config.json: not a JSON object");
  }
  auto resolve = [&](const char* key) -> std::optional<int32_t> {
    if (!config.contains(key)) return std::nullopt;
    const Json& v = config[key];
    std::string content;
    if (v.is_string()) {
      content = v.get<std::string>();
    } else if (v.is_object() && v.contains("content") &&
               v["content"].is_string()) {
      content = v["content"].get<std::string>();
    } else {
      return std::nullopt;
    }
    for (const AddedToken& t : s_->added) {
      if (t.content == content) return t.id;
    }
    auto it = vocab_.find(content);
    if (it != vocab_.end()) return it->second;
    return std::nullopt;
  };
  s_->bos_id = resolve("bos_token");
  s_->eos_id = resolve("eos_token");
  s_->pad_id = resolve("pad_token");
  return Status::OK();
}

}  // namespace tokenizer_internal

namespace {

using tokenizer_internal::Json;
using tokenizer_internal::Loader;
using tokenizer_internal::State;
using tokenizer_internal::TemplatePiece;

Result<std::string> ReadFile(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::NotFound(path.string() + ": no such file");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return Status::IOError(path.string() + ": read failed");
  }
  return text.str();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(
    std::string_view tokenizer_json, std::string_view tokenizer_config,
    std::string_view name) {
  auto state = std::make_unique<State>();
  Loader loader(state.get(), name);
  // nlohmann::json reports with exceptions; they stop here.
  try {
    Json root = Json::parse(tokenizer_json);
    if (!root.is_object())
      return loader.Bad("the document", "is not an object");
    const Json null_json;
    auto field = [&](const char* key) -> const Json& {
      return root.contains(key) ? root[key] : null_json;
    };
    HY_RETURN_IF_ERROR(loader.Normalizer(field("normalizer"), "normalizer"));
    HY_RETURN_IF_ERROR(loader.Model(field("model")));
    HY_RETURN_IF_ERROR(
        loader.PreTokenizer(field("pre_tokenizer"), "pre_tokenizer"));
    HY_RETURN_IF_ERROR(
        loader.PostProcessor(field("post_processor"), "post_processor"));
    HY_RETURN_IF_ERROR(loader.Decoder(field("decoder"), "decoder"));
    HY_RETURN_IF_ERROR(loader.AddedTokens(field("added_tokens")));
    for (const TemplatePiece& piece : state->single_template) {
      for (int32_t id : piece.ids) {
        if (id < 0 || id >= state->vocab_size) {
          return loader.Bad("post_processor", "template names id " +
                                                  std::to_string(id) +
                                                  ", outside the vocabulary");
        }
      }
    }
    HY_RETURN_IF_ERROR(loader.Config(tokenizer_config));
  } catch (const Json::exception& e) {
    return Status::InvalidArgument(std::string(name) + ": " + e.what());
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(state)));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file = path;
  if (fs::is_directory(file, ec)) file /= "tokenizer.json";
  HY_ASSIGN_OR_RETURN(std::string json, ReadFile(file));
  std::string config;
  const fs::path config_path = file.parent_path() / "tokenizer_config.json";
  if (fs::exists(config_path, ec)) {
    HY_ASSIGN_OR_RETURN(config, ReadFile(config_path));
  }
  return FromJson(json, config, file.string());
}

}  // namespace hy::trainer
