#include "promql.h"

#include <cctype>
#include <set>

namespace hy::metrics::testing {
namespace {

bool IsIdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool IsIdentChar(char c) {
  return IsIdentStart(c) || std::isdigit(static_cast<unsigned char>(c));
}

const std::set<std::string>& Aggregations() {
  static const std::set<std::string> kSet = {
      "sum",    "min",   "max",          "avg",  "group",   "stddev",
      "stdvar", "count", "count_values", "topk", "bottomk", "quantile"};
  return kSet;
}

const std::set<std::string>& Keywords() {
  static const std::set<std::string> kSet = {
      "by",          "without", "on",  "ignoring", "group_left",
      "group_right", "bool",    "and", "or",       "unless",
      "offset",      "atan2",   "inf", "nan"};
  return kSet;
}

bool IsLabelListKeyword(const std::string& word) {
  return word == "by" || word == "without" || word == "on" ||
         word == "ignoring" || word == "group_left" || word == "group_right";
}

size_t SkipSpace(const std::string& s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

// Returns the index after the string literal starting at s[i].
Result<size_t> SkipString(const std::string& s, size_t i) {
  char quote = s[i++];
  while (i < s.size() && s[i] != quote) {
    if (s[i] == '\\' && quote != '`') ++i;
    ++i;
  }
  if (i >= s.size()) return Status::InvalidArgument("unterminated string");
  return i + 1;
}

// Returns the index after the bracket group starting at s[i] (one of
// '{', '(', '['), honouring strings.
Result<size_t> SkipGroup(const std::string& s, size_t i) {
  char open = s[i];
  char close = open == '{' ? '}' : open == '(' ? ')' : ']';
  int depth = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '"' || c == '\'' || c == '`') {
      HY_ASSIGN_OR_RETURN(i, SkipString(s, i));
      continue;
    }
    if (c == open) ++depth;
    if (c == close && --depth == 0) return i + 1;
    ++i;
  }
  return Status::InvalidArgument(std::string("unbalanced '") + open + "'");
}

}  // namespace

Result<std::vector<SelectorUse>> FindSelectors(const std::string& expr) {
  std::vector<SelectorUse> uses;
  std::vector<std::string> stack;  // Function of each open '('.
  std::string pending;             // Function whose '(' comes next.
  size_t i = 0;
  while (i < expr.size()) {
    char c = expr[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '"' || c == '\'' || c == '`') {
      HY_ASSIGN_OR_RETURN(i, SkipString(expr, i));
    } else if (c == '{' || c == '[') {
      HY_ASSIGN_OR_RETURN(i, SkipGroup(expr, i));
    } else if (c == '(') {
      stack.push_back(pending);
      pending.clear();
      ++i;
    } else if (c == ')') {
      if (stack.empty()) return Status::InvalidArgument("unbalanced ')'");
      stack.pop_back();
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      while (i < expr.size() && (IsIdentChar(expr[i]) || expr[i] == '.')) ++i;
    } else if (IsIdentStart(c)) {
      size_t start = i;
      while (i < expr.size() && IsIdentChar(expr[i])) ++i;
      std::string word = expr.substr(start, i - start);
      size_t next = SkipSpace(expr, i);
      bool call = next < expr.size() && expr[next] == '(';
      if (IsLabelListKeyword(word)) {
        if (call) {
          HY_ASSIGN_OR_RETURN(i, SkipGroup(expr, next));
        }
      } else if (Aggregations().count(word) != 0 || call) {
        pending = word;
      } else if (Keywords().count(word) == 0) {
        SelectorUse use;
        use.metric = word;
        use.functions.assign(stack.begin(), stack.end());
        size_t j = next;
        if (j < expr.size() && expr[j] == '{') {
          HY_ASSIGN_OR_RETURN(j, SkipGroup(expr, j));
          j = SkipSpace(expr, j);
        }
        if (j < expr.size() && expr[j] == '[') {
          HY_ASSIGN_OR_RETURN(size_t end, SkipGroup(expr, j));
          use.range = expr.substr(j + 1, end - j - 2);
          j = end;
        }
        i = j;
        uses.push_back(std::move(use));
      }
    } else {
      ++i;  // Operators, commas.
    }
  }
  if (!stack.empty()) return Status::InvalidArgument("unbalanced '('");
  return uses;
}

Result<std::string> SubstituteVariables(
    const std::string& text, const std::map<std::string, std::string>& values) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    std::string name;
    size_t end = i;
    if (text.compare(i, 2, "${") == 0) {
      end = text.find('}', i);
      if (end == std::string::npos) {
        return Status::InvalidArgument("unterminated ${ in " + text);
      }
      name = text.substr(i + 2, end - i - 2);
      name = name.substr(0, name.find(':'));  // Drop ":format".
      ++end;
    } else if (text.compare(i, 2, "[[") == 0) {
      end = text.find("]]", i);
      if (end == std::string::npos) {
        return Status::InvalidArgument("unterminated [[ in " + text);
      }
      name = text.substr(i + 2, end - i - 2);
      end += 2;
    } else if (text[i] == '$') {
      end = i + 1;
      while (end < text.size() && IsIdentChar(text[end]) && text[end] != ':') {
        ++end;
      }
      name = text.substr(i + 1, end - i - 1);
    } else {
      out += text[i++];
      continue;
    }
    auto it = values.find(name);
    if (it == values.end()) {
      return Status::NotFound("no value for Grafana variable \"" + name +
                              "\" in: " + text);
    }
    out += it->second;
    i = end;
  }
  return out;
}

}  // namespace hy::metrics::testing
