// Pre-tokenization: the regex split (PCRE2, UTF + UCP, JIT) and the
// byte-level alphabet (GPT-2's bytes_to_unicode).

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>
#include <utility>

#include "tokenizer_internal.h"

namespace hy::trainer::tokenizer_internal {
namespace {

std::array<uint32_t, 256> MakeByteToCodePoint() {
  // Printable Latin-1 bytes stand for themselves; the rest (controls, space,
  // DEL, NBSP, soft hyphen) are moved to U+0100 onward, in byte order.
  std::array<uint32_t, 256> map{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                           (b >= 0xAE && b <= 0xFF);
    map[b] = printable ? b : next++;
  }
  return map;
}

void AppendCodePoint(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else {  // The byte-level alphabet stays below U+0800.
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string PcreError(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

bool IsAsciiLetter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

}  // namespace

const std::array<uint32_t, 256>& ByteToCodePoint() {
  static const std::array<uint32_t, 256> map = MakeByteToCodePoint();
  return map;
}

void AppendByteLevel(std::string_view bytes, std::string* out) {
  const auto& map = ByteToCodePoint();
  for (unsigned char b : bytes) AppendCodePoint(map[b], out);
}

bool ByteLevelToBytes(std::string_view token, std::string* bytes) {
  // Code points of the alphabet are < 0x144, so a table covers them.
  static const std::array<int16_t, 0x200> reverse = [] {
    std::array<int16_t, 0x200> r{};
    r.fill(-1);
    const auto& map = ByteToCodePoint();
    for (int b = 0; b < 256; ++b) r[map[b]] = static_cast<int16_t>(b);
    return r;
  }();
  bytes->clear();
  const auto* p = reinterpret_cast<const unsigned char*>(token.data());
  const size_t n = token.size();
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    if (p[i] < 0x80) {
      cp = p[i];
      i += 1;
    } else if ((p[i] & 0xE0) == 0xC0 && i + 1 < n) {
      cp = ((p[i] & 0x1Fu) << 6) | (p[i + 1] & 0x3Fu);
      i += 2;
    } else {
      return false;
    }
    if (cp >= reverse.size() || reverse[cp] < 0) return false;
    bytes->push_back(static_cast<char>(reverse[cp]));
  }
  return true;
}

std::string TranslatePattern(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  size_t i = 0;
  while (i < pattern.size()) {
    if (pattern.compare(i, 4, "(?i:") != 0) {
      // Copy one token; an escape keeps its escaped character.
      const size_t len = pattern[i] == '\\' && i + 1 < pattern.size() ? 2 : 1;
      out.append(pattern.substr(i, len));
      i += len;
      continue;
    }
    // A group of literals and '|' only: spell each ASCII letter as [xX],
    // with the characters outside ASCII that case-fold to it.
    size_t end = i + 4;
    bool plain = true;
    while (end < pattern.size() && pattern[end] != ')') {
      const char c = pattern[end];
      if (c == '\\' || c == '(' || c == '[' || c == '.' || c == '*' ||
          c == '+' || c == '?' || c == '{' || c == '^' || c == '$' ||
          static_cast<unsigned char>(c) >= 0x80) {
        plain = false;
        break;
      }
      ++end;
    }
    if (!plain || end == pattern.size()) {
      out.append("(?i:");
      i += 4;
      continue;
    }
    out.append("(?:");
    for (size_t k = i + 4; k < end; ++k) {
      const char c = pattern[k];
      if (IsAsciiLetter(c)) {
        const char lower = static_cast<char>(c | 0x20);
        out.push_back('[');
        out.push_back(lower);
        out.push_back(static_cast<char>(c & ~0x20));
        if (lower == 's') out.append("\\x{17F}");   // long s
        if (lower == 'k') out.append("\\x{212A}");  // Kelvin sign
        out.push_back(']');
      } else {
        out.push_back(c);
      }
    }
    out.push_back(')');
    i = end + 1;
  }
  return out;
}

struct RegexSplitter::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

RegexSplitter::~RegexSplitter() = default;

Result<std::unique_ptr<RegexSplitter>> RegexSplitter::Create(
    std::string_view pattern, bool literal) {
  std::string translated =
      literal ? std::string(pattern) : TranslatePattern(pattern);
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK;
  if (literal) options |= PCRE2_LITERAL;
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()),
                    translated.size(), options, &error, &error_offset, nullptr);
  if (code == nullptr) {
    return Status::InvalidArgument(
        "regex /" + std::string(pattern) + "/ at offset " +
        std::to_string(error_offset) + ": " + PcreError(error));
  }
  std::unique_ptr<RegexSplitter> splitter(new RegexSplitter());
  splitter->impl_ = std::make_unique<Impl>();
  splitter->impl_->code = code;
  // Without JIT (an unsupported CPU) the interpreter gives the same matches.
  splitter->impl_->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return splitter;
}

Status RegexSplitter::Split(
    std::string_view text, size_t base,
    std::vector<std::pair<uint32_t, uint32_t>>* pieces) const {
  // One match-data block per thread, reused across calls.
  struct MatchData {
    pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
    ~MatchData() { pcre2_match_data_free(data); }
  };
  thread_local MatchData md;
  if (md.data == nullptr) return Status::ResourceExhausted("pcre2 match data");

  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t pos = 0, gap = 0;  // [gap, match start) is an unmatched piece
  while (pos < n) {
    int rc = PCRE2_ERROR_JIT_STACKLIMIT;
    if (impl_->jit) {
      rc = pcre2_jit_match(impl_->code, subject, n, pos, PCRE2_NO_UTF_CHECK,
                           md.data, nullptr);
    }
    // The interpreter keeps its backtracking frames on the heap, so a match
    // too deep for the JIT's stack still completes there.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(impl_->code, subject, n, pos, PCRE2_NO_UTF_CHECK,
                       md.data, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return Status::Internal("pcre2 match: " + PcreError(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const size_t start = ov[0], end = ov[1];
    if (end == start) {  // An empty match splits nothing; step one character.
      pos = start + 1;
      while (pos < n &&
             (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) {
        ++pos;
      }
      continue;
    }
    if (start > gap) pieces->emplace_back(base + gap, base + start);
    pieces->emplace_back(base + start, base + end);
    pos = gap = end;
  }
  if (n > gap) pieces->emplace_back(base + gap, base + n);
  return Status::OK();
}

}  // namespace hy::trainer::tokenizer_internal
