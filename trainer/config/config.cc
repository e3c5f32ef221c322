// TrainConfig <-> YAML (yaml-cpp), overrides and ValidateConfig.
//
// One table (Fields, config_fields.cc) names every key with a pointer to
// its field; parsing, printing and overrides all walk it, so a new field is
// one line there.

#include "hy/trainer/config/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <system_error>
#include <type_traits>
#include <variant>
#include <vector>

#include "config_fields.h"
#include "hy/common/edit_distance.h"

namespace hy::trainer {
namespace {

using internal::Field;
using internal::FieldPtr;
using internal::Fields;
using internal::Range;

// ---- Values -> text ---------------------------------------------------------

// The shortest text that reads back to `v`, always in YAML's float form
// ("0.001", "1.0e-08", "10000.0", ".inf", ".nan").
std::string FormatDouble(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, ec == std::errc() ? end : buf);
  const size_t e = s.find('e');
  if (s.find('.') == std::string::npos) {
    s.insert(e == std::string::npos ? s.size() : e, ".0");
  }
  return s;
}

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower((unsigned char)ch));
  return s;
}

// A plain scalar when it cannot be read as anything but that string,
// otherwise double-quoted with escapes.
std::string QuoteString(const std::string& s) {
  bool plain = !s.empty() && (std::isalpha((unsigned char)s[0]) ||
                              s[0] == '/' || s[0] == '_');
  for (char ch : s) {
    plain = plain && (std::isalnum((unsigned char)ch) ||
                      std::string_view("_./-@+").find(ch) != std::string::npos);
  }
  for (const char* w : {"true", "false", "yes", "no", "on", "off", "null"}) {
    plain = plain && Lower(s) != w && Lower(s) != std::string(w).substr(0, 1);
  }
  if (plain) return s;
  YAML::Emitter e;
  e << YAML::DoubleQuoted << s;
  return e.c_str();
}

template <typename T>
std::string Num(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return FormatDouble(v);
  } else {
    return std::to_string(v);
  }
}

std::string Repr(const bool* p) { return *p ? "true" : "false"; }
std::string Repr(const std::string* p) { return QuoteString(*p); }
std::string Repr(const AdvEstimator* p) {
  return *p == AdvEstimator::kGrpo ? "grpo" : "gae";
}
std::string Repr(const std::vector<TaskKind>* p) {
  std::string out = "[";
  for (size_t i = 0; i < p->size(); ++i) {
    out += (i ? ", " : "") + std::string(TaskKindName((*p)[i]));
  }
  return out + "]";
}
std::string Repr(const std::vector<std::string>* p) {
  std::string out = "[";
  for (size_t i = 0; i < p->size(); ++i) {
    out += (i ? ", " : "") + QuoteString((*p)[i]);
  }
  return out + "]";
}
template <typename T>
std::string Repr(const T* p) {
  return Num(*p);
}

// ---- YAML -> values ---------------------------------------------------------

struct Reader {
  bool with_lines = true;  // Off for overrides (their "line 1" means nothing).

  std::string At(const YAML::Mark& mark) const {
    if (!with_lines || mark.is_null()) return "";
    return " (line " + std::to_string(mark.line + 1) + ")";
  }

  Status TypeError(const std::string& path, const char* want,
                   const YAML::Node& v) const {
    std::string got = v.IsScalar()     ? "\"" + v.Scalar() + "\""
                      : v.IsMap()      ? "a map"
                      : v.IsSequence() ? "a list"
                                       : "nothing";
    return Status::InvalidArgument(path + ": expected " + want + ", got " +
                                   got + At(v.Mark()));
  }

  // The index of v's value (any case) in `names`, or a TypeError.
  Result<int> ReadName(const std::string& path, const YAML::Node& v,
                       std::initializer_list<const char*> names,
                       const char* want) const {
    const std::string s = v.IsScalar() ? Lower(v.Scalar()) : "";
    int i = 0;
    for (const char* name : names) {
      if (s == name) return i;
      ++i;
    }
    return TypeError(path, want, v);
  }

  // Integers and doubles; YAML's .inf / .nan too for doubles.
  template <typename T>
  Status Read(const std::string& path, const YAML::Node& v, T* out) const {
    std::string s = v.IsScalar() ? v.Scalar() : "";
    const std::string l = Lower(s);
    if (std::is_floating_point_v<T> &&
        (l == ".inf" || l == "+.inf" || l == "-.inf" || l == ".nan")) {
      *out = static_cast<T>(l == ".nan"   ? std::nan("")
                            : l[0] == '-' ? -HUGE_VAL
                                          : HUGE_VAL);
      return Status::OK();
    }
    if (s.size() > 1 && s[0] == '+' && s[1] != '-') s.erase(0, 1);
    T value{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
      return TypeError(path,
                       std::is_floating_point_v<T> ? "a number"
                       : std::is_unsigned_v<T>     ? "a non-negative integer"
                                                   : "an integer",
                       v);
    }
    *out = value;
    return Status::OK();
  }

  Status Read(const std::string& path, const YAML::Node& v, bool* out) const {
    HY_ASSIGN_OR_RETURN(
        int i, ReadName(path, v, {"true", "yes", "on", "false", "no", "off"},
                        "true or false"));
    *out = i < 3;
    return Status::OK();
  }

  Status Read(const std::string& path, const YAML::Node& v,
              std::string* out) const {
    if (!v.IsNull() && !v.IsScalar()) return TypeError(path, "a string", v);
    *out = v.IsNull() ? "" : v.Scalar();  // `key:` or `key: ~` is "".
    return Status::OK();
  }

  Status Read(const std::string& path, const YAML::Node& v,
              AdvEstimator* out) const {
    HY_ASSIGN_OR_RETURN(int i,
                        ReadName(path, v, {"gae", "grpo"}, "gae or grpo"));
    *out = i == 0 ? AdvEstimator::kGae : AdvEstimator::kGrpo;
    return Status::OK();
  }

  // A list of strings; a single string is a list of one, null is empty.
  Status Read(const std::string& path, const YAML::Node& v,
              std::vector<std::string>* out) const {
    if (v.IsNull()) {
      out->clear();
      return Status::OK();
    }
    if (!v.IsScalar() && !v.IsSequence()) {
      return TypeError(path, "a list of strings", v);
    }
    std::vector<std::string> items;
    for (const YAML::Node& item : v.IsScalar()
                                      ? std::vector<YAML::Node>{v}
                                      : v.as<std::vector<YAML::Node>>()) {
      if (!item.IsScalar()) return TypeError(path, "a list of strings", item);
      items.push_back(item.Scalar());
    }
    *out = std::move(items);
    return Status::OK();
  }

  Status Read(const std::string& path, const YAML::Node& v,
              std::vector<TaskKind>* out) const {
    if (!v.IsScalar() && !v.IsSequence()) {
      return TypeError(path, "a list of reverse, sort, add", v);
    }
    std::vector<TaskKind> kinds;
    // `kinds: add` is `kinds: [add]`.
    for (const YAML::Node& item : v.IsScalar()
                                      ? std::vector<YAML::Node>{v}
                                      : v.as<std::vector<YAML::Node>>()) {
      HY_ASSIGN_OR_RETURN(int i,
                          ReadName(path, item, {"reverse", "sort", "add"},
                                   "reverse, sort or add"));
      kinds.push_back(static_cast<TaskKind>(i));
    }
    *out = std::move(kinds);
    return Status::OK();
  }
};

class Merger {
 public:
  Merger(TrainConfig* config, bool with_lines)
      : fields_(Fields(config)), reader_{with_lines} {}

  // Assigns `value` to the key or section at `path` ("" is the whole
  // config). `key_mark` locates the key for errors.
  Status Assign(const std::string& path, const YAML::Node& value,
                const YAML::Mark& key_mark) {
    for (const Field& f : fields_) {
      if (f.path != path) continue;
      return std::visit([&](auto* p) { return reader_.Read(path, value, p); },
                        f.ptr);
    }
    if (path == "algorithm" && value.IsScalar()) {  // `algorithm: grpo`
      return Assign("algorithm.adv_estimator", value, key_mark);
    }
    if (!IsSection(path)) {
      return Status::InvalidArgument("unknown key " + path +
                                     reader_.At(key_mark) + DidYouMean(path));
    }
    if (value.IsNull()) return Status::OK();  // An empty section.
    if (!value.IsMap()) {
      return reader_.TypeError(path.empty() ? "config" : path, "a map of keys",
                               value);
    }
    for (const auto& kv : value) {
      const std::string key = kv.first.Scalar();
      HY_RETURN_IF_ERROR(Assign(path.empty() ? key : path + "." + key,
                                kv.second, kv.first.Mark()));
    }
    return Status::OK();
  }

 private:
  bool IsSection(const std::string& path) const {
    return path.empty() ||
           std::any_of(fields_.begin(), fields_.end(), [&](const Field& f) {
             return f.path.compare(0, path.size() + 1, path + ".") == 0;
           });
  }

  // "; did you mean X?" for the known key nearest `path` (at most 3
  // edits, or the same last name in another section), else "".
  std::string DidYouMean(const std::string& path) const {
    const std::string leaf = path.substr(path.rfind('.') + 1);
    std::string best;
    size_t best_distance = 4;
    for (const Field& f : fields_) {
      size_t d = EditDistance(path, f.path);
      if (f.path.substr(f.path.rfind('.') + 1) == leaf)
        d = std::min<size_t>(d, 1);
      if (d < best_distance) {
        best_distance = d;
        best = f.path;
      }
    }
    return best.empty() ? "" : "; did you mean " + best + "?";
  }

  std::vector<Field> fields_;
  Reader reader_;
};

// ---- Validation helpers -----------------------------------------------------

Status Bad(const std::string& field, const std::string& what,
           const std::string& got) {
  return Status::InvalidArgument(field + " " + what + ", got " + got);
}

// Checks `f` against its range.
Status CheckRange(const Field& f) {
  const Range& r = f.range;
  return std::visit(
      [&](const auto* p) -> Status {
        using T = std::decay_t<decltype(*p)>;
        if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
          const double v = static_cast<double>(*p);
          const bool ok = (std::is_integral_v<T> || std::isfinite(v)) &&
                          (r.lo_open ? v > r.lo : v >= r.lo) &&
                          (r.hi_open ? v < r.hi : v <= r.hi);
          return ok ? Status::OK() : Bad(f.path, r.want, Num(*p));
        } else if constexpr (std::is_same_v<T, std::string>) {
          const bool ok = r.one_of == nullptr ||
                          std::string_view(r.one_of).find("|" + *p + "|") !=
                              std::string_view::npos;
          return ok ? Status::OK() : Bad(f.path, r.want, "\"" + *p + "\"");
        } else {
          return Status::OK();
        }
      },
      f.ptr);
}

}  // namespace

Status MergeConfigYaml(std::string_view yaml, TrainConfig* config) {
  try {
    const YAML::Node doc = YAML::Load(std::string(yaml));
    return Merger(config, /*with_lines=*/true).Assign("", doc, doc.Mark());
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("config YAML: ") + e.what());
  }
}

Result<TrainConfig> ParseConfigYaml(std::string_view yaml) {
  TrainConfig config;
  HY_RETURN_IF_ERROR(MergeConfigYaml(yaml, &config));
  HY_RETURN_IF_ERROR(ValidateConfig(config));
  return config;
}

Status ApplyOverride(TrainConfig* config, std::string_view key_eq_value) {
  const size_t eq = key_eq_value.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Status::InvalidArgument("override \"" + std::string(key_eq_value) +
                                   "\" is not section.key=value");
  }
  const std::string key(key_eq_value.substr(0, eq));
  try {
    const YAML::Node value =
        YAML::Load(std::string(key_eq_value.substr(eq + 1)));
    return Merger(config, /*with_lines=*/false)
        .Assign(key, value, YAML::Mark::null_mark());
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(
        key + ": cannot read the value as YAML: " + e.what());
  }
}

std::string ToYaml(const TrainConfig& config) {
  TrainConfig copy = config;
  std::string out, prev;  // prev: the previous key's path.
  for (const Field& f : Fields(&copy)) {
    size_t depth = 0, begin = 0;
    for (size_t dot; (dot = f.path.find('.', begin)) != std::string::npos;
         begin = dot + 1, ++depth) {
      if (prev.compare(0, dot + 1, f.path, 0, dot + 1) != 0) {  // New section.
        out += std::string(2 * depth, ' ') + f.path.substr(begin, dot - begin) +
               ":\n";
      }
    }
    out += std::string(2 * depth, ' ') + f.path.substr(begin) + ": " +
           std::visit([](const auto* p) { return Repr(p); }, f.ptr) + "\n";
    prev = f.path;
  }
  return out;
}

Status ValidateConfig(const TrainConfig& c) {
  HY_RETURN_IF_ERROR(ValidateModelConfig(c.model));
  const TaskConfig& task = c.task;
  if (task.kinds.empty()) {
    return Status::InvalidArgument("task.kinds must name at least one kind");
  }
  TrainConfig copy = c;
  for (const Field& f : Fields(&copy)) HY_RETURN_IF_ERROR(CheckRange(f));
  if (task.max_digits < task.min_digits) {
    return Bad("task.max_digits",
               "must be >= task.min_digits (" + Num(task.min_digits) + ")",
               Num(task.max_digits));
  }
  HY_RETURN_IF_ERROR(ValidateTaskConfig(task));
  if ((c.data.reward == "python") != !c.data.reward_file.empty()) {
    return Bad("data.reward_file",
               c.data.reward == "python"
                   ? "must name a .py file when data.reward is python"
                   : "is read only when data.reward is python",
               c.data.reward_file);
  }
  const bool from_task = c.data.train_files.empty();
  if (from_task && !c.data.val_files.empty()) {
    return Bad("data.val_files",
               "needs data.train_files (their tokenizer and reward)",
               Num(static_cast<int64_t>(c.data.val_files.size())) + " files");
  }
  if (from_task && c.model.vocab_size < kVocabSize) {
    return Bad("model.vocab_size",
               "must hold the task's " + Num(kVocabSize) + " token ids",
               Num(c.model.vocab_size));
  }
  HY_RETURN_IF_ERROR(
      ValidateTensorParallel(c.model, c.rollout.tensor_model_parallel_size));

  const RolloutConfig& r = c.rollout;
  const int64_t samples = int64_t{r.batch_size} * r.n;
  if (c.actor.ppo_mini_batch_size > samples) {
    return Bad(
        "actor.ppo_mini_batch_size",
        "must be <= rollout.batch_size * rollout.n (" + Num(samples) + ")",
        Num(c.actor.ppo_mini_batch_size));
  }
  // The longest sequence the model sees: the longest prompt, then a
  // response or the SFT answer (up to max_digits + 1 digits) and EOS.
  const int prompt = MaxPromptTokens(task);
  const int longest = prompt + std::max(r.response_length, task.max_digits + 2);
  if (from_task && longest > c.model.max_position_embeddings) {
    return Bad("model.max_position_embeddings",
               "must hold the longest sequence, " + Num(longest) +
                   " tokens (a prompt of " + Num(prompt) +
                   ", then rollout.response_length or an SFT answer)",
               Num(c.model.max_position_embeddings));
  }

  const AlgorithmConfig& a = c.algorithm;
  if (a.adv_estimator == AdvEstimator::kGrpo && r.n < 2) {
    return Bad("rollout.n",
               "must be >= 2 with algorithm.adv_estimator grpo (the "
               "responses to a prompt form its group)",
               Num(r.n));
  }
  if (c.metrics.bind.empty()) {
    return Bad("metrics.bind", "must be an address to listen on", "\"\"");
  }
  const std::string& gw = c.metrics.pushgateway;
  if (!gw.empty()) {
    const size_t colon = gw.rfind(':');
    int port = 0;
    const char* end = gw.data() + gw.size();
    if (colon == std::string::npos || colon == 0 || colon + 1 == gw.size() ||
        std::from_chars(gw.data() + colon + 1, end, port).ptr != end ||
        port < 1 || port > 65535) {
      return Bad("metrics.pushgateway", "must be host:port", "\"" + gw + "\"");
    }
  }
  return Status::OK();
}

}  // namespace hy::trainer
