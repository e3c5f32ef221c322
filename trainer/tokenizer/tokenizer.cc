// Tokenizer: the encode pipeline (added-token split, NFC, regex split,
// BPE, template) and decode. Loading lives in tokenizer_load.cc.

#include "hy/trainer/tokenizer/tokenizer.h"

#include <algorithm>
#include <climits>
#include <string>
#include <utility>

#include "tokenizer_internal.h"

namespace hy::trainer {

using tokenizer_internal::AddedToken;
using tokenizer_internal::AddedTokenMatcher;
using tokenizer_internal::State;

namespace tokenizer_internal {

void AddedTokenMatcher::Add(std::string_view content, int32_t index) {
  if (by_content_.count(content) != 0) return;  // the first one wins
  contents_.emplace_back(content);
  by_content_.emplace(contents_.back(), index);
  first_byte_[static_cast<unsigned char>(content[0])] = true;
  if (content.size() == 1) {
    has_single_byte_ = true;
  } else {
    if (first_two_.empty()) first_two_.assign(65536, false);
    first_two_[static_cast<unsigned char>(content[0]) << 8 |
               static_cast<unsigned char>(content[1])] = true;
  }
  if (std::find(lengths_.begin(), lengths_.end(), content.size()) ==
      lengths_.end()) {
    lengths_.push_back(content.size());
    std::sort(lengths_.begin(), lengths_.end(), std::greater<>());
  }
}

size_t AddedTokenMatcher::NextCandidate(std::string_view text,
                                        size_t pos) const {
  for (; pos < text.size(); ++pos) {
    if (first_byte_[static_cast<unsigned char>(text[pos])]) return pos;
  }
  return std::string_view::npos;
}

int32_t AddedTokenMatcher::MatchAt(std::string_view text, size_t pos,
                                   size_t* len) const {
  const bool two = pos + 1 < text.size() && !first_two_.empty() &&
                   first_two_[static_cast<unsigned char>(text[pos]) << 8 |
                              static_cast<unsigned char>(text[pos + 1])];
  if (!two && !has_single_byte_) return -1;
  for (size_t l : lengths_) {
    if (l > 1 && !two) continue;
    if (pos + l > text.size()) continue;
    auto it = by_content_.find(text.substr(pos, l));
    if (it != by_content_.end()) {
      *len = l;
      return it->second;
    }
  }
  return -1;
}

}  // namespace tokenizer_internal

namespace {

// A stretch of text, or an added token (index >= 0) found in it.
struct Section {
  size_t begin, end;
  int32_t added;
};

// Decodes the code point ending at text[end - 1] (valid UTF-8); sets *start.
uint32_t CodePointBefore(std::string_view text, size_t end, size_t* start) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  *start = i;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + i;
  const size_t n = end - i;
  if (n == 1) return p[0];
  uint32_t cp = p[0] & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (p[k] & 0x3F);
  return cp;
}

uint32_t CodePointAt(std::string_view text, size_t pos, size_t* len) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  *len = p[0] < 0x80 ? 1 : p[0] < 0xE0 ? 2 : p[0] < 0xF0 ? 3 : 4;
  if (*len == 1) return p[0];
  uint32_t cp = p[0] & (0x7F >> *len);
  for (size_t k = 1; k < *len; ++k) cp = (cp << 6) | (p[k] & 0x3F);
  return cp;
}

// Unicode White_Space, what lstrip / rstrip remove next to an added token.
bool IsWhiteSpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Splits text[begin, end) at the added tokens of `matcher`, then applies
// their lstrip / rstrip to the neighbouring text.
void SplitAdded(const State& s, const AddedTokenMatcher& matcher,
                std::string_view text, std::vector<Section>* out) {
  out->clear();
  size_t start = 0, pos = 0;
  while ((pos = matcher.NextCandidate(text, pos)) != std::string_view::npos) {
    size_t len = 0;
    const int32_t index = matcher.MatchAt(text, pos, &len);
    if (index < 0) {
      ++pos;
      continue;
    }
    if (pos > start) out->push_back(Section{start, pos, -1});
    out->push_back(Section{pos, pos + len, index});
    pos = start = pos + len;
  }
  if (text.size() > start) out->push_back(Section{start, text.size(), -1});
  for (size_t i = 0; i < out->size(); ++i) {
    if ((*out)[i].added < 0) continue;
    const AddedToken& t = s.added[(*out)[i].added];
    if (t.lstrip && i > 0 && (*out)[i - 1].added < 0) {
      Section& prev = (*out)[i - 1];
      size_t cp_start;
      while (prev.end > prev.begin &&
             IsWhiteSpace(CodePointBefore(text, prev.end, &cp_start))) {
        prev.end = cp_start;
      }
    }
    if (t.rstrip && i + 1 < out->size() && (*out)[i + 1].added < 0) {
      Section& next = (*out)[i + 1];
      size_t len;
      while (next.begin < next.end &&
             IsWhiteSpace(CodePointAt(text, next.begin, &len))) {
        next.begin += len;
      }
    }
  }
}

// Pre-tokenizes normalized text and runs BPE on every piece.
Status EncodePlain(const State& s, std::string_view text,
                   std::vector<int32_t>* ids) {
  thread_local std::vector<std::pair<uint32_t, uint32_t>> pieces, next;
  pieces.clear();
  pieces.emplace_back(0, static_cast<uint32_t>(text.size()));
  for (const auto& splitter : s.splitters) {
    next.clear();
    for (const auto& [b, e] : pieces) {
      HY_RETURN_IF_ERROR(splitter->Split(text.substr(b, e - b), b, &next));
    }
    pieces.swap(next);
  }
  for (const auto& [b, e] : pieces) {
    s.bpe->EncodeWord(text.substr(b, e - b), ids);
  }
  return Status::OK();
}

// Normalizes a stretch of text outside the raw added tokens, finds the
// normalized added tokens in it and encodes the rest.
Status EncodeSegment(const State& s, std::string_view text,
                     std::vector<int32_t>* ids) {
  std::string normalized;
  if (s.nfc) {
    HY_ASSIGN_OR_RETURN(bool changed,
                        tokenizer_internal::NormalizeNfc(text, &normalized));
    if (changed) text = normalized;
  }
  if (s.normalized_matcher.empty()) return EncodePlain(s, text, ids);
  std::vector<Section> sections;
  SplitAdded(s, s.normalized_matcher, text, &sections);
  for (const Section& sec : sections) {
    if (sec.added >= 0) {
      ids->push_back(s.added[sec.added].id);
    } else if (sec.end > sec.begin) {
      HY_RETURN_IF_ERROR(
          EncodePlain(s, text.substr(sec.begin, sec.end - sec.begin), ids));
    }
  }
  return Status::OK();
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Tokenizer::~Tokenizer() = default;

Status Tokenizer::EncodeAppend(std::string_view text,
                               std::vector<int32_t>* ids) const {
  const size_t bad = tokenizer_internal::FindInvalidUtf8(text);
  if (bad != std::string_view::npos) {
    return Status::InvalidArgument("Encode: text is not valid UTF-8 at byte " +
                                   std::to_string(bad));
  }
  if (text.size() >= UINT32_MAX) {
    return Status::InvalidArgument("Encode: text of 4 GiB or more");
  }
  const State& s = *state_;
  const size_t before = ids->size();
  Status status;
  if (s.raw_matcher.empty()) {
    status = EncodeSegment(s, text, ids);
  } else {
    std::vector<Section> sections;
    SplitAdded(s, s.raw_matcher, text, &sections);
    for (const Section& sec : sections) {
      if (sec.added >= 0) {
        ids->push_back(s.added[sec.added].id);
      } else if (sec.end > sec.begin) {
        status =
            EncodeSegment(s, text.substr(sec.begin, sec.end - sec.begin), ids);
        if (!status.ok()) break;
      }
    }
  }
  if (!status.ok()) ids->resize(before);
  return status;
}

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                               bool add_special_tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (!add_special_tokens || !state_->has_template) {
    HY_RETURN_IF_ERROR(EncodeAppend(text, &ids));
    return ids;
  }
  for (const auto& piece : state_->single_template) {
    if (piece.is_sequence) {
      HY_RETURN_IF_ERROR(EncodeAppend(text, &ids));
    } else {
      ids.insert(ids.end(), piece.ids.begin(), piece.ids.end());
    }
  }
  return ids;
}

Result<std::string> Tokenizer::Decode(const std::vector<int32_t>& ids,
                                      bool skip_special_tokens) const {
  const State& s = *state_;
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= s.vocab_size) {
      return Status::InvalidArgument("Decode: id " + std::to_string(id) +
                                     " at position " + std::to_string(i) +
                                     " is not in the vocabulary");
    }
    const int32_t added = s.added_index[id];
    if (added >= 0) {
      const AddedToken& t = s.added[added];
      if (!(skip_special_tokens && t.special)) bytes += t.content;
      continue;
    }
    if (id < s.bpe->size() && !s.bpe->bytes_of(id).empty()) {
      bytes += s.bpe->bytes_of(id);
      continue;
    }
    auto it = s.unmappable.find(id);
    if (it == s.unmappable.end()) {
      return Status::InvalidArgument("Decode: id " + std::to_string(id) +
                                     " at position " + std::to_string(i) +
                                     " is not in the vocabulary");
    }
    bytes += it->second;
  }
  if (tokenizer_internal::FindInvalidUtf8(bytes) == std::string::npos) {
    return bytes;
  }
  std::string text;
  text.reserve(bytes.size() + 16);
  tokenizer_internal::AppendUtf8Lossy(bytes, &text);
  return text;
}

int32_t Tokenizer::vocab_size() const { return state_->vocab_size; }

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  const State& s = *state_;
  for (const AddedToken& t : s.added) {
    if (t.content == token) return t.id;
  }
  std::string bytes;
  if (tokenizer_internal::ByteLevelToBytes(token, &bytes)) {
    const int32_t id = s.bpe->Find(bytes);
    if (id >= 0) return id;
  }
  for (const auto& [id, text] : s.unmappable) {
    if (text == token) return id;
  }
  return std::nullopt;
}

std::optional<std::string> Tokenizer::IdToToken(int32_t id) const {
  const State& s = *state_;
  if (id < 0 || id >= s.vocab_size) return std::nullopt;
  if (s.added_index[id] >= 0) return s.added[s.added_index[id]].content;
  if (id < s.bpe->size() && !s.bpe->bytes_of(id).empty()) {
    std::string token;
    tokenizer_internal::AppendByteLevel(s.bpe->bytes_of(id), &token);
    return token;
  }
  auto it = s.unmappable.find(id);
  if (it != s.unmappable.end()) return it->second;
  return std::nullopt;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  const State& s = *state_;
  return id >= 0 && id < s.vocab_size && s.added_index[id] >= 0 &&
         s.added[s.added_index[id]].special;
}

std::optional<int32_t> Tokenizer::bos_id() const { return state_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return state_->eos_id; }
std::optional<int32_t> Tokenizer::pad_id() const { return state_->pad_id; }

}  // namespace hy::trainer
