// UTF-8 checks and NFC normalization (ICU) for the tokenizer.

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/uniset.h>
#include <unicode/utypes.h>

#include <cstring>
#include <memory>
#include <string>

#include "tokenizer_internal.h"

namespace hy::trainer::tokenizer_internal {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes
// there do not start one; *maximal is the length of the longest prefix of a
// valid sequence (at least 1), for lossy replacement.
size_t SequenceLength(const unsigned char* s, size_t n, size_t i,
                      size_t* maximal) {
  const unsigned char c = s[i];
  *maximal = 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (c < 0x80) {
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // > U+10FFFF
  } else {
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= n) return 0;
    const unsigned char b = s[i + k];
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return 0;
    *maximal = k + 1;
  }
  return len;
}

}  // namespace

size_t FindInvalidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    size_t maximal;
    const size_t len = SequenceLength(p, n, i, &maximal);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

void AppendUtf8Lossy(std::string_view bytes, std::string* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0, run = 0;  // [run, i) is valid and not yet appended
  while (i < n) {
    size_t maximal;
    const size_t len = SequenceLength(p, n, i, &maximal);
    if (len != 0) {
      i += len;
      continue;
    }
    out->append(bytes.data() + run, i - run);
    out->append("\xEF\xBF\xBD");  // U+FFFD
    i += maximal;
    run = i;
  }
  out->append(bytes.data() + run, n - run);
}

namespace {

// The version of the Unicode Character Database that Hugging Face's
// `tokenizers` normalizes with (its Rust crate unicode-normalization-
// alignments): code points assigned later are not in its tables.
constexpr const char16_t* kHfNormalizationSet = u"[:age=9.0:]";

// ICU's NFC restricted to the code points HF's tables know. Built once;
// FilteredNormalizer2's const methods are thread-safe.
Result<const icu::Normalizer2*> HfNfcInstance() {
  struct Instance {
    UErrorCode err = U_ZERO_ERROR;
    std::unique_ptr<icu::UnicodeSet> known;
    std::unique_ptr<icu::FilteredNormalizer2> nfc;
    Instance() {
      const icu::Normalizer2* full = icu::Normalizer2::getNFCInstance(err);
      if (U_FAILURE(err)) return;
      known = std::make_unique<icu::UnicodeSet>(
          icu::UnicodeString(kHfNormalizationSet), err);
      if (U_FAILURE(err)) return;
      known->freeze();
      nfc = std::make_unique<icu::FilteredNormalizer2>(*full, *known);
    }
  };
  static const Instance* instance = new Instance();
  if (U_FAILURE(instance->err)) {
    return Status::Internal(std::string("ICU NFC instance: ") +
                            u_errorName(instance->err));
  }
  return static_cast<const icu::Normalizer2*>(instance->nfc.get());
}

}  // namespace

Result<bool> NormalizeNfc(std::string_view in, std::string* out) {
  // Code points below U+0300 are NFC_Quick_Check=Yes and never combine with
  // what precedes them; their UTF-8 lead bytes are all below 0xCC.
  bool simple = true;
  for (unsigned char c : in) {
    if (c >= 0xCC) {
      simple = false;
      break;
    }
  }
  if (simple) return false;

  HY_ASSIGN_OR_RETURN(const icu::Normalizer2* nfc, HfNfcInstance());
  UErrorCode err = U_ZERO_ERROR;
  const icu::StringPiece piece(in.data(), static_cast<int32_t>(in.size()));
  if (nfc->isNormalizedUTF8(piece, err) && U_SUCCESS(err)) return false;
  err = U_ZERO_ERROR;
  std::string result;
  result.reserve(in.size());
  icu::StringByteSink<std::string> sink(&result);
  nfc->normalizeUTF8(0, piece, sink, nullptr, err);
  if (U_FAILURE(err)) {
    return Status::Internal(std::string("ICU NFC normalization: ") +
                            u_errorName(err));
  }
  *out = std::move(result);
  return true;
}

}  // namespace hy::trainer::tokenizer_internal
