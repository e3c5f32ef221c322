#include "hy/trainer/data/answer.h"

namespace hy::trainer {
namespace {

constexpr std::string_view kMarker = "####";
constexpr std::string_view kSpace = " \t\n\r\f\v";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

bool IsAlnum(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool DigitAt(std::string_view s, size_t i) {
  return i < s.size() && IsDigit(s[i]);
}

// True when a number starts at s[i]: a digit, or a sign with a digit after
// it and no letter or digit before it.
bool NumberStartsAt(std::string_view s, size_t i) {
  if (IsDigit(s[i])) return true;
  return (s[i] == '+' || s[i] == '-') && DigitAt(s, i + 1) &&
         (i == 0 || !IsAlnum(s[i - 1]));
}

size_t SkipDigits(std::string_view s, size_t i) {
  while (DigitAt(s, i)) ++i;
  return i;
}

std::string Canonical(bool negative, std::string digits, std::string frac) {
  const size_t nonzero = digits.find_first_not_of('0');
  digits = nonzero == std::string::npos ? "0" : digits.substr(nonzero);
  frac.erase(frac.find_last_not_of('0') + 1);  // npos + 1 == 0: all erased.
  if (digits == "0" && frac.empty()) return "0";
  return (negative ? "-" : "") + digits + (frac.empty() ? "" : "." + frac);
}

// Reads the number starting at s[*i] (NumberStartsAt(s, *i)), moves *i past
// it and returns its canonical form.
std::string ReadNumber(std::string_view s, size_t* i) {
  size_t j = *i;
  const bool negative = s[j] == '-';
  if (!IsDigit(s[j])) ++j;
  size_t end = SkipDigits(s, j);
  std::string digits(s.substr(j, end - j));
  // ",ddd" groups: exactly three digits after each comma.
  while (end < s.size() && s[end] == ',' && SkipDigits(s, end + 1) == end + 4) {
    digits += s.substr(end + 1, 3);
    end += 4;
  }
  std::string frac;
  if (end < s.size() && s[end] == '.' && DigitAt(s, end + 1)) {
    const size_t frac_end = SkipDigits(s, end + 1);
    frac = s.substr(end + 1, frac_end - end - 1);
    end = frac_end;
  }
  *i = end;
  return Canonical(negative, std::move(digits), std::move(frac));
}

}  // namespace

std::optional<std::string> CanonicalNumber(std::string_view text) {
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return std::nullopt;
  text = text.substr(first, text.find_last_not_of(kSpace) + 1 - first);
  if (!NumberStartsAt(text, 0)) return std::nullopt;
  size_t i = 0;
  std::string number = ReadNumber(text, &i);
  if (i != text.size()) return std::nullopt;
  return number;
}

std::optional<std::string> MarkedAnswer(std::string_view text) {
  const size_t marker = text.rfind(kMarker);
  if (marker == std::string_view::npos) return std::nullopt;
  size_t i = text.find_first_not_of(kSpace, marker + kMarker.size());
  if (i == std::string_view::npos || !NumberStartsAt(text, i)) {
    return std::nullopt;
  }
  return ReadNumber(text, &i);
}

std::optional<std::string> LastNumber(std::string_view text) {
  std::optional<std::string> last;
  size_t i = 0;
  while (i < text.size()) {
    if (NumberStartsAt(text, i)) {
      last = ReadNumber(text, &i);
    } else {
      ++i;
    }
  }
  return last;
}

std::optional<std::string_view> BoxedContent(std::string_view text) {
  constexpr std::string_view kBoxed = "\\boxed{";
  const size_t at = text.rfind(kBoxed);
  if (at == std::string_view::npos) return std::nullopt;
  const size_t begin = at + kBoxed.size();
  int depth = 1;
  for (size_t i = begin; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return text.substr(begin, i - begin);
  }
  return std::nullopt;
}

std::optional<std::string> FinalAnswer(std::string_view text) {
  if (auto boxed = BoxedContent(text)) return LastNumber(*boxed);
  if (text.find(kMarker) != std::string_view::npos) return MarkedAnswer(text);
  return LastNumber(text);
}

}  // namespace hy::trainer
