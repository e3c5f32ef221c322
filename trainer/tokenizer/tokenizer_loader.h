// tokenizer_internal::Loader: fills a tokenizer_internal::State from a
// parsed tokenizer.json, one section per method, refusing with
// InvalidArgument ("<file>: <field> ...") whatever the encoder does not
// implement. tokenizer_load.cc holds the model, the added tokens and
// tokenizer_config.json; tokenizer_pipeline.cc the normalizer,
// pre-tokenizer, post-processor and decoder. Internal to trainer/.

#ifndef HY_TRAINER_TOKENIZER_TOKENIZER_LOADER_H_
#define HY_TRAINER_TOKENIZER_TOKENIZER_LOADER_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>

#include "hy/common/status.h"
#include "tokenizer_internal.h"

namespace hy::trainer::tokenizer_internal {

using Json = nlohmann::json;

// obj[key], or a null value when obj has no such key (never a copy).
inline const Json& Get(const Json& obj, const char* key) {
  static const Json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

class Loader {
 public:
  Loader(State* state, std::string_view name) : s_(state), name_(name) {}

  Status Bad(std::string_view field, std::string_view what) const {
    return Status::InvalidArgument(name_ + ": " + std::string(field) + " " +
                                   std::string(what));
  }
  Status Unsupported(std::string_view field, const Json& type,
                     std::string_view supported) const {
    return Bad(field, type.dump() + " is not supported (supported: " +
                          std::string(supported) + ")");
  }
  static std::string TypeOf(const Json& j) {
    return j.is_object() && j.contains("type") && j["type"].is_string()
               ? j["type"].get<std::string>()
               : std::string();
  }

  // Each reads one section into the State and returns InvalidArgument
  // naming the field when it is malformed or not supported. `field` is the
  // section's path in the document, for messages. Normalizer must run
  // before AddedTokens (normalized contents), Model before Config.
  Status Model(const Json& model);  // vocab, merges, ignore_merges
  Status Normalizer(const Json& n, const std::string& field);
  Status PreTokenizer(const Json& p, const std::string& field);
  Status PostProcessor(const Json& p, const std::string& field);
  Status Decoder(const Json& d, const std::string& field);
  Status AddedTokens(const Json& added);
  // tokenizer_config.json text (empty: none): bos / eos / pad ids.
  Status Config(std::string_view config_text);

 private:
  State* s_;
  std::string name_;
  // Byte-level form -> id; the keys point into the parsed document.
  std::unordered_map<std::string_view, int32_t> vocab_;
};

}  // namespace hy::trainer::tokenizer_internal

#endif  // HY_TRAINER_TOKENIZER_TOKENIZER_LOADER_H_
