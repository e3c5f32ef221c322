// The pipeline sections of tokenizer.json: normalizer, pre_tokenizer,
// post_processor and decoder (see tokenizer_loader.h).

#include <string>
#include <utility>
#include <vector>

#include "tokenizer_loader.h"

namespace hy::trainer::tokenizer_internal {
namespace {

// The split of the GPT-2 ByteLevel pre-tokenizer when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

Status Loader::Normalizer(const Json& n, const std::string& field) {
  if (n.is_null()) return Status::OK();
  const std::string type = TypeOf(n);
  if (type == "NFC") {
    s_->nfc = true;
    return Status::OK();
  }
  if (type == "Sequence" && n.contains("normalizers") &&
      n["normalizers"].is_array()) {
    for (size_t i = 0; i < n["normalizers"].size(); ++i) {
      HY_RETURN_IF_ERROR(
          Normalizer(n["normalizers"][i],
                     field + ".normalizers[" + std::to_string(i) + "]"));
    }
    return Status::OK();
  }
  return Unsupported(field + ".type", n.value("type", Json()),
                     "null, NFC, Sequence");
}

Status Loader::PreTokenizer(const Json& p, const std::string& field) {
  const std::string type = TypeOf(p);
  const char* kSupported = "ByteLevel, or Sequence of Split then ByteLevel";
  std::vector<const Json*> steps;
  if (type == "Sequence" && p.contains("pretokenizers") &&
      p["pretokenizers"].is_array()) {
    for (const Json& step : p["pretokenizers"]) steps.push_back(&step);
  } else if (type == "ByteLevel") {
    steps.push_back(&p);
  } else {
    return Unsupported(field + ".type",
                       p.is_null() ? Json() : p.value("type", Json()),
                       kSupported);
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const Json& step = *steps[i];
    const std::string f =
        type == "Sequence" ? field + ".pretokenizers[" + std::to_string(i) + "]"
                           : field;
    const std::string step_type = TypeOf(step);
    if (step_type == "ByteLevel") {
      if (i + 1 != steps.size()) return Bad(f, "ByteLevel must come last");
      if (step.value("add_prefix_space", false)) {
        return Unsupported(f + ".add_prefix_space", true, "false");
      }
      if (step.value("use_regex", true)) {
        HY_ASSIGN_OR_RETURN(auto splitter,
                            RegexSplitter::Create(kGpt2Pattern, false));
        s_->splitters.push_back(std::move(splitter));
      }
      s_->byte_level = true;
    } else if (step_type == "Split") {
      if (step.value("behavior", "") != "Isolated") {
        return Unsupported(f + ".behavior", step.value("behavior", Json()),
                           "Isolated");
      }
      if (step.value("invert", false)) {
        return Unsupported(f + ".invert", true, "false");
      }
      const Json& pattern = Get(step, "pattern");
      const bool regex =
          pattern.contains("Regex") && pattern["Regex"].is_string();
      const bool literal =
          pattern.contains("String") && pattern["String"].is_string();
      if (!regex && !literal)
        return Bad(f + ".pattern", "is neither Regex nor String");
      auto splitter = RegexSplitter::Create(
          pattern[regex ? "Regex" : "String"].get<std::string>(), literal);
      if (!splitter.ok())
        return Bad(f + ".pattern", splitter.status().message());
      s_->splitters.push_back(std::move(splitter).value());
    } else {
      return Unsupported(f + ".type", step.value("type", Json()), kSupported);
    }
  }
  if (!s_->byte_level) return Bad(field, "has no ByteLevel step");
  return Status::OK();
}

Status Loader::PostProcessor(const Json& p, const std::string& field) {
  if (p.is_null()) return Status::OK();
  const std::string type = TypeOf(p);
  if (type == "ByteLevel") return Status::OK();  // offsets only
  if (type == "Sequence" && p.contains("processors") &&
      p["processors"].is_array()) {
    for (size_t i = 0; i < p["processors"].size(); ++i) {
      HY_RETURN_IF_ERROR(
          PostProcessor(p["processors"][i],
                        field + ".processors[" + std::to_string(i) + "]"));
    }
    return Status::OK();
  }
  if (type != "TemplateProcessing") {
    return Unsupported(field + ".type", p.value("type", Json()),
                       "null, ByteLevel, TemplateProcessing, Sequence");
  }
  if (s_->has_template) return Bad(field, "is a second TemplateProcessing");
  const Json& single = Get(p, "single");
  const Json& specials = Get(p, "special_tokens");
  if (!single.is_array()) return Bad(field + ".single", "is not an array");
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string f = field + ".single[" + std::to_string(i) + "]";
    const Json& item = single[i];
    TemplatePiece piece;
    if (item.contains("Sequence")) {
      if (item["Sequence"].value("id", "") != "A") {
        return Bad(f, "names a sequence other than A");
      }
      piece.is_sequence = true;
    } else if (item.contains("SpecialToken") &&
               item["SpecialToken"].contains("id")) {
      const Json& name = item["SpecialToken"]["id"];
      if (!name.is_string() || !specials.contains(name.get<std::string>())) {
        return Bad(f, "names a special token missing from special_tokens");
      }
      const Json& ids = specials[name.get<std::string>()]["ids"];
      if (!ids.is_array()) return Bad(f, "special token has no ids");
      for (const Json& id : ids) {
        if (!id.is_number_integer())
          return Bad(f, "special token id is not an integer");
        piece.ids.push_back(id.get<int32_t>());
      }
    } else {
      return Bad(f, "is neither Sequence nor SpecialToken");
    }
    s_->single_template.push_back(std::move(piece));
  }
  s_->has_template = true;
  return Status::OK();
}

Status Loader::Decoder(const Json& d, const std::string& field) {
  const std::string type = TypeOf(d);
  if (type == "ByteLevel") return Status::OK();
  if (type == "Sequence" && d.contains("decoders") &&
      d["decoders"].is_array() && !d["decoders"].empty()) {
    for (size_t i = 0; i < d["decoders"].size(); ++i) {
      HY_RETURN_IF_ERROR(Decoder(
          d["decoders"][i], field + ".decoders[" + std::to_string(i) + "]"));
    }
    return Status::OK();
  }
  return Unsupported(field + ".type",
                     d.is_null() ? Json() : d.value("type", Json()),
                     "ByteLevel");
}

}  // namespace hy::trainer::tokenizer_internal
