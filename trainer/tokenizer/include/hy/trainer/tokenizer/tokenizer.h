// Tokenizer: text <-> token ids for the byte-level BPE tokenizers that
// Hugging Face ships as tokenizer.json (Qwen2 / Qwen3, Llama 3, GPT-2 style).
// It is meant for the rollout path (prompts in, sampled ids out) and gives
// the same ids as Hugging Face's tokenizers for the files it accepts.
//
// What is supported (anything else is refused by Load with InvalidArgument
// naming the file and the field):
//   model           BPE (vocab + merges as "a b" strings or [a, b] pairs),
//                   ignore_merges, unk_token and fuse_unk, no dropout /
//                   byte fallback / affixes. A byte with no symbol in the
//                   vocabulary (SmolLM2 lacks 21) is handled as Rust
//                   `tokenizers` does: dropped, its neighbours meeting,
//                   when unk_token is null; else the unknown token (one
//                   per run of such bytes with fuse_unk)
//   normalizer      null, NFC, or a Sequence of those
//   pre_tokenizer   ByteLevel (add_prefix_space false), alone or as the last
//                   element of a Sequence after Split (Regex or String
//                   pattern, behavior Isolated, not inverted)
//   post_processor  null, ByteLevel, TemplateProcessing, or a Sequence
//   decoder         ByteLevel (or a Sequence holding only ByteLevel)
//   added_tokens    special and non-special, with lstrip / rstrip /
//                   normalized (single_word is refused)
// Added tokens written inside the text are recognized (leftmost-longest),
// special or not, as Hugging Face does when split_special_tokens is false.
//
// Ownership: a Tokenizer owns all its tables; it keeps no reference to the
// files it was loaded from.
//
// Thread-safety: after Load, every const method may be called concurrently
// from any number of threads. The BPE word cache inside is sharded and
// guarded by mutexes.

#ifndef HY_TRAINER_TOKENIZER_TOKENIZER_H_
#define HY_TRAINER_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"

namespace hy::trainer {

namespace tokenizer_internal {
struct State;
}  // namespace tokenizer_internal

class Tokenizer {
 public:
  // Loads `path`: a tokenizer.json file, or a directory holding one. When
  // tokenizer_config.json sits beside it, its bos_token / eos_token /
  // pad_token are resolved to ids (bos_id() etc.).
  // Returns NotFound if the file is missing, IOError if it cannot be read,
  // InvalidArgument if it is not JSON or uses something not supported.
  static Result<std::unique_ptr<Tokenizer>> Load(const std::string& path);

  // Parses tokenizer.json text already in memory. `tokenizer_config` may be
  // empty (no bos/eos/pad). `name` is used in error messages.
  // Returns InvalidArgument as Load does.
  static Result<std::unique_ptr<Tokenizer>> FromJson(
      std::string_view tokenizer_json, std::string_view tokenizer_config,
      std::string_view name = "tokenizer.json");

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Encodes UTF-8 text. With add_special_tokens the post-processor's
  // template is applied (Llama 3: <|begin_of_text|> first).
  // Returns InvalidArgument, naming the byte, if `text` is not valid UTF-8
  // (where Python's strict decoder fails): Hugging Face's tokenizers only
  // ever see valid text, and replacing the bytes would give the ids of
  // another text.
  Result<std::vector<int32_t>> Encode(std::string_view text,
                                      bool add_special_tokens = false) const;

  // Appends the ids of `text` to *ids (no template; add_special_tokens
  // false). Cheaper than Encode when building one sequence from parts.
  // On error *ids keeps what it held before the call.
  // REQUIRES: ids != nullptr.
  Status EncodeAppend(std::string_view text, std::vector<int32_t>* ids) const;

  // Decodes ids to text: vocabulary tokens through the byte-level reverse
  // map, added tokens as their content (special ones left out with
  // skip_special_tokens). Byte sequences that are not valid UTF-8 (a cut
  // multi-byte character) become U+FFFD, one per maximal invalid
  // subsequence, as Hugging Face's Rust tokenizers do.
  // Returns InvalidArgument naming the first id that is not in the
  // vocabulary.
  Result<std::string> Decode(const std::vector<int32_t>& ids,
                             bool skip_special_tokens = false) const;

  // One more than the largest id (vocabulary and added tokens).
  int32_t vocab_size() const;

  // The id of a token written as in tokenizer.json (byte-level form, e.g.
  // "Ġthe", or an added token's content); nullopt if there is none.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The token of `id` as in tokenizer.json; nullopt if there is none.
  std::optional<std::string> IdToToken(int32_t id) const;
  // True if `id` is an added token marked special.
  bool IsSpecial(int32_t id) const;

  // From tokenizer_config.json beside tokenizer.json; nullopt when the file,
  // the entry or the token is absent.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;

 private:
  explicit Tokenizer(std::unique_ptr<tokenizer_internal::State> state);

  std::unique_ptr<tokenizer_internal::State> state_;
};

}  // namespace hy::trainer

#endif  // HY_TRAINER_TOKENIZER_TOKENIZER_H_
