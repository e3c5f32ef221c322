// The pieces of hy::trainer::Tokenizer, one per seam of the pipeline:
//
//   text -> added-token split -> normalize (NFC) -> regex pre-tokenize
//        -> byte-level BPE per piece -> post-process (template)
//
// Internal to trainer/; tests and benchmarks go through tokenizer.h.

#ifndef HY_TRAINER_TOKENIZER_TOKENIZER_INTERNAL_H_
#define HY_TRAINER_TOKENIZER_TOKENIZER_INTERNAL_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hy/common/result.h"
#include "hy/common/status.h"

namespace hy::trainer::tokenizer_internal {

// ---- UTF-8 (normalize.cc) --------------------------------------------------

// Returns the offset of the first byte that does not start a valid UTF-8
// sequence (overlong forms, surrogates and > U+10FFFF are invalid), or npos.
size_t FindInvalidUtf8(std::string_view s);

// Appends `bytes` to *out with every maximal invalid subsequence replaced by
// U+FFFD (the same policy as Rust's String::from_utf8_lossy).
void AppendUtf8Lossy(std::string_view bytes, std::string* out);

// Returns true and sets *out to the NFC form of `in` when it differs; returns
// false (and leaves *out alone) when `in` is already in NFC.
//
// NFC as Hugging Face's `tokenizers` computes it, which is what a model was
// trained with: its normalization tables are Unicode 9.0's, so a code point
// assigned later (U+0D3B, Unicode 10; U+1ACD, Unicode 14; ...) is a starter
// (class 0) that neither decomposes nor composes and is never reordered.
// ICU's tables are newer; its NFC is applied only to the characters of
// Unicode 9.0 (icu::FilteredNormalizer2 over [:age=9.0:]), the rest pass
// through as boundaries, which is the same thing.
// REQUIRES: `in` is valid UTF-8.
Result<bool> NormalizeNfc(std::string_view in, std::string* out);

// ---- Byte level (pretokenize.cc) -------------------------------------------

// GPT-2's bytes_to_unicode: the code point that stands for each byte.
const std::array<uint32_t, 256>& ByteToCodePoint();
// Appends the byte-level form (UTF-8 of the mapped code points) of `bytes`.
void AppendByteLevel(std::string_view bytes, std::string* out);
// Sets *bytes to the raw bytes a byte-level token stands for. Returns false
// if some character of `token` is not one of the 256 byte characters.
bool ByteLevelToBytes(std::string_view token, std::string* bytes);

// Splits text with one PCRE2 pattern (UTF + UCP, JIT): matches and the gaps
// between them are both pieces ("Isolated"). Thread-safe.
class RegexSplitter {
 public:
  // `pattern` is a Hugging Face (Oniguruma-flavoured) regex, or a literal
  // string when `literal`. Returns InvalidArgument if PCRE2 rejects it.
  static Result<std::unique_ptr<RegexSplitter>> Create(std::string_view pattern,
                                                       bool literal);
  ~RegexSplitter();

  // Appends to *pieces the [begin, end) byte ranges of `text`'s pieces,
  // offset by `base`. REQUIRES: text is valid UTF-8.
  Status Split(std::string_view text, size_t base,
               std::vector<std::pair<uint32_t, uint32_t>>* pieces) const;

 private:
  RegexSplitter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Rewrites Oniguruma-only syntax for PCRE2. `(?i:...)` groups made of plain
// literals (the contractions of the GPT-style patterns) fold case as
// Oniguruma does in Hugging Face's Rust tokenizers: ASCII letters, plus the
// one-character folds outside ASCII (the long s U+017F matches s, the Kelvin
// sign U+212A matches k); not multi-character ones (the "st" ligature).
std::string TranslatePattern(std::string_view pattern);

// ---- BPE (bpe.cc) ----------------------------------------------------------

// A byte-level BPE model: ids for raw byte strings, merges as a rank table
// keyed by the pair of ids, and a word cache. Thread-safe after Build.
class BpeModel {
 public:
  struct Merge {
    int32_t left;
    int32_t right;
  };

  // What a byte without a token of its own becomes, as Rust `tokenizers`'
  // BPE does it: with no unknown token (`unk_id` < 0) the byte is dropped
  // and its neighbours meet (and may merge); else it becomes `unk_id`, and
  // with `fuse_unk` a run of such bytes becomes one `unk_id`.
  struct Unknown {
    int32_t unk_id = -1;
    bool fuse_unk = false;
  };

  // `tokens[id]` holds the raw bytes of token `id` (empty where there is no
  // token); merges are given by rank. Bytes with no token are handled as
  // `unknown` says. Returns InvalidArgument (prefixed by `where`) if a
  // merge's result is not in the vocab.
  static Result<std::unique_ptr<BpeModel>> Build(
      std::vector<std::string> tokens, const std::vector<Merge>& merges,
      bool ignore_merges, Unknown unknown, std::string_view where);

  // The bytes that have no token of their own, in order.
  std::vector<uint8_t> MissingBytes() const;

  // Appends the ids of one pre-tokenized piece (raw bytes).
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  // The id of a raw byte string, or -1.
  int32_t Find(std::string_view bytes) const;
  const std::string& bytes_of(int32_t id) const { return tokens_[id]; }
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }

 private:
  struct MergeEntry {
    uint64_t key;  // (left << 32) | right; kEmptyKey for a free slot.
    int32_t rank;
    int32_t merged;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};
  // The word cache. Short words (almost all) live in direct-mapped slots of
  // one cache line each, with no allocation; longer ones in hash maps that
  // are cleared when full. Both are split into shards, each under a mutex.
  static constexpr int kCacheShards = 64;
  static constexpr size_t kSlotsPerShard = 1024;
  static constexpr size_t kSlotKey = 22;
  static constexpr size_t kSlotIds = 8;
  static constexpr size_t kLongWordsPerShard = 2048;

  struct alignas(64) CacheSlot {
    uint64_t hash = 0;  // 0: empty
    uint8_t len = 0;
    uint8_t n = 0;
    char key[kSlotKey];
    int32_t ids[kSlotIds];
  };
  struct CacheShard {
    std::mutex mu;
    std::unique_ptr<CacheSlot[]> slots{new CacheSlot[kSlotsPerShard]};
    std::unordered_map<std::string, std::vector<int32_t>> long_words;
  };

  BpeModel() = default;
  const MergeEntry* FindMerge(int32_t left, int32_t right) const;
  void MergeWord(std::string_view word, std::vector<int32_t>* out) const;
  bool CacheLookup(std::string_view word, uint64_t hash,
                   std::vector<int32_t>* out) const;
  void CacheStore(std::string_view word, uint64_t hash, const int32_t* ids,
                  size_t n) const;
  // Writes the ids the bytes of `word` start as (bytes without a token
  // dropped or made unknown) to syms[0..); returns how many. `syms` has
  // room for word.size().
  size_t InitialSymbols(std::string_view word, int32_t* syms) const;
  void MergeSmall(std::string_view word, std::vector<int32_t>* out) const;
  void MergeLarge(std::string_view word, std::vector<int32_t>* out) const;

  std::vector<std::string> tokens_;                    // id -> raw bytes
  std::unordered_map<std::string_view, int32_t> ids_;  // into tokens_
  std::array<int32_t, 256> byte_ids_{};  // -1: no token (see Unknown)
  bool all_bytes_ = true;                // every byte has a token
  Unknown unknown_;
  std::vector<MergeEntry> merge_table_;  // open addressing, power of 2
  uint64_t merge_mask_ = 0;
  bool ignore_merges_ = false;
  mutable std::unique_ptr<CacheShard[]> cache_;
};

// ---- Added tokens and the whole pipeline (tokenizer.cc) --------------------

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// Finds added tokens in text: at each position the longest content that
// matches, leftmost first (what Hugging Face's splitters do).
class AddedTokenMatcher {
 public:
  void Add(std::string_view content, int32_t index);
  bool empty() const { return by_content_.empty(); }
  // Returns the index given to Add of the token matching at `pos`, and its
  // length in *len; -1 if none matches there.
  int32_t MatchAt(std::string_view text, size_t pos, size_t* len) const;
  // The next position >= pos where a token may start (npos if none).
  size_t NextCandidate(std::string_view text, size_t pos) const;

 private:
  std::deque<std::string> contents_;  // stable storage for the keys below
  std::unordered_map<std::string_view, int32_t> by_content_;
  std::vector<size_t> lengths_;  // distinct, longest first
  std::array<bool, 256> first_byte_{};
  std::vector<bool> first_two_;   // 65536 bits: the first two bytes
  bool has_single_byte_ = false;  // some token is one byte long
};

// One element of a TemplateProcessing template: either the sequence itself
// (ids empty, is_sequence) or fixed ids.
struct TemplatePiece {
  bool is_sequence = false;
  std::vector<int32_t> ids;
};

struct State {
  std::unique_ptr<BpeModel> bpe;
  // Vocabulary tokens outside the byte alphabet, decoded as written.
  std::unordered_map<int32_t, std::string> unmappable;
  bool nfc = false;
  bool byte_level = false;
  std::vector<std::unique_ptr<RegexSplitter>> splitters;
  std::vector<AddedToken> added;
  std::vector<int32_t> added_index;      // id -> index in added, or -1
  AddedTokenMatcher raw_matcher;         // normalized == false
  AddedTokenMatcher normalized_matcher;  // normalized == true
  bool has_template = false;
  std::vector<TemplatePiece> single_template;
  int32_t vocab_size = 0;
  std::optional<int32_t> bos_id, eos_id, pad_id;
};

}  // namespace hy::trainer::tokenizer_internal

#endif  // HY_TRAINER_TOKENIZER_TOKENIZER_INTERNAL_H_
